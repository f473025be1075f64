"""KV-cache decoding against a full recompute, for both cache layouts."""

import jax.numpy as jnp
import numpy as np
import pytest

from memjax.models import decoder
from memjax.models.kv_cache import init_cache, repeat_rows
from memjax.sampling.padding import left_pad, positions_after
from tests.sampling.tiny import reference_logits, tiny_model


@pytest.mark.parametrize("per_layer", [False, True], ids=["stacked_scan", "per_layer_unrolled"])
def test_cached_decode_logits_equal_full_recompute(per_layer):
    params, cfg = tiny_model(1)
    if per_layer:
        params = decoder.unstack_layers(params)
    rows = [[5, 9, 2, 33], [7], [1, 2, 3, 4, 5, 6, 7]]
    history = [list(r) for r in rows]
    tokens, mask = left_pad(rows, 8, pad_id=0)
    positions = positions_after(mask, np.zeros(3, np.int32))
    cache = init_cache(cfg, 3, 32, per_layer=per_layer)
    logits, cache = decoder.jit_forward(
        params, jnp.asarray(tokens), jnp.asarray(positions), cfg, token_mask=mask, cache=cache
    )
    for i, row in enumerate(history):
        np.testing.assert_allclose(
            logits[i, -1], reference_logits(params, cfg, row)[-1], atol=1e-4, rtol=1e-4
        )

    # Single-token steps, with row 1 paused on some steps (a hole in its cache), then a
    # left-padded multi-token chunk, as a continuation writes it.
    rng = np.random.default_rng(0)
    for step in range(4):
        live = np.array([True, step % 2 == 0, True])
        new = rng.integers(0, cfg.vocab_size, size=3)
        pos = np.array([len(h) for h in history])
        logits, cache = decoder.jit_forward(
            params,
            jnp.asarray(new[:, None], jnp.int32),
            jnp.asarray(pos[:, None], jnp.int32),
            cfg,
            token_mask=jnp.asarray(live[:, None]),
            cache=cache,
        )
        for i in np.flatnonzero(live):
            history[i].append(int(new[i]))
            np.testing.assert_allclose(
                logits[i, 0], reference_logits(params, cfg, history[i])[-1], atol=1e-4, rtol=1e-4
            )
    chunks = [[3, 4, 5], [6], [7, 8]]
    tokens, mask = left_pad(chunks, 4, pad_id=0)
    positions = positions_after(mask, np.array([len(h) for h in history]))
    logits, cache = decoder.jit_forward(
        params, jnp.asarray(tokens), jnp.asarray(positions), cfg, token_mask=mask, cache=cache
    )
    for i, chunk in enumerate(chunks):
        history[i] += chunk
        ref = reference_logits(params, cfg, history[i])
        np.testing.assert_allclose(
            logits[i, -len(chunk) :], ref[-len(chunk) :], atol=1e-4, rtol=1e-4
        )
    assert int(cache.index) == 8 + 4 + 4


def test_repeat_rows_shares_a_prefill():
    params, cfg = tiny_model(2)
    prompt = jnp.asarray([[4, 8, 15, 16]], jnp.int32)
    pos = jnp.arange(4)[None]
    _, cache = decoder.jit_forward(params, prompt, pos, cfg, cache=init_cache(cfg, 1, 16))
    shared = repeat_rows(cache, 3)
    _, separate = decoder.jit_forward(
        params, jnp.repeat(prompt, 3, 0), jnp.repeat(pos, 3, 0), cfg, cache=init_cache(cfg, 3, 16)
    )
    nxt = jnp.asarray([[1], [2], [3]], jnp.int32)
    a, _ = decoder.jit_forward(params, nxt, jnp.full((3, 1), 4), cfg, cache=shared)
    b, _ = decoder.jit_forward(params, nxt, jnp.full((3, 1), 4), cfg, cache=separate)
    np.testing.assert_allclose(a, b, atol=1e-5)
