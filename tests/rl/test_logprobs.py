"""Chunked log-probs and entropies against the full softmax; critic alignment."""

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.params import init_params
from memjax.rl import critic
from memjax.training import logprobs

CFG = DecoderConfig(
    "llama",
    vocab_size=37,
    embed_dim=16,
    mlp_dim=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=4,
)


def _full(hidden, w, targets, temperature):
    logits = jnp.einsum("btd,dv->btv", hidden, w) / temperature
    logz = jax.nn.log_softmax(logits, -1)
    logp = jnp.take_along_axis(logz, targets[..., None], -1)[..., 0]
    ent = -(jnp.exp(logz) * logz).sum(-1)
    return logp, ent


def test_chunked_matches_full_softmax_values_and_grads():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    hidden = jax.random.normal(k1, (2, 5, 8))
    w = 3.0 * jax.random.normal(k2, (8, 37))  # 37 = 4 chunks of 10, the last one padded
    targets = jax.random.randint(k3, (2, 5), 0, 37)
    for t in (1.0, 0.7):
        lp, ent = jax.jit(
            lambda h, w, t=t: logprobs.chunked_logprobs(h, w, targets, temperature=t, chunk=10)
        )(hidden, w)
        lp_ref, ent_ref = _full(hidden, w, targets, t)
        np.testing.assert_allclose(lp, lp_ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(ent, ent_ref, rtol=1e-5, atol=1e-5)

    def loss(fn, h, w):
        lp, ent = fn(h, w)
        return (lp * 1.3).sum() + (ent * 0.7).sum()

    chunked = lambda h, w: logprobs.chunked_logprobs(h, w, targets, chunk=10)
    full = lambda h, w: _full(h, w, targets, 1.0)
    g = jax.jit(jax.grad(lambda h, w: loss(chunked, h, w), argnums=(0, 1)))(hidden, w)
    g_ref = jax.grad(lambda h, w: loss(full, h, w), argnums=(0, 1))(hidden, w)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    # A tied embedding [V, D] is read as stored (vocab_major); values and grads are the same,
    # both with padded chunks (10) and with chunks that divide V exactly (37 = one chunk).
    for c in (10, 37):
        major = lambda h, e, c=c: logprobs.chunked_logprobs(
            h, e, targets, chunk=c, vocab_major=True
        )
        g_major = jax.jit(jax.grad(lambda h, e, f=major: loss(f, h, e), argnums=(0, 1)))(
            hidden, w.T
        )
        np.testing.assert_allclose(
            major(hidden, w.T)[0], _full(hidden, w, targets, 1.0)[0], atol=1e-5
        )
        np.testing.assert_allclose(g_major[0], g_ref[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g_major[1], g_ref[1].T, rtol=1e-4, atol=1e-5)


def test_chunked_memory_does_not_scale_with_vocab():
    # The compiled program's temporaries hold [B, T, C] slabs, never [B, T, V].
    hidden = jnp.zeros((4, 256, 16))
    targets = jnp.zeros((4, 256), jnp.int32)

    def temp_bytes(V):
        w = jnp.zeros((16, V))
        f = jax.jit(
            jax.grad(
                lambda h, w: logprobs.chunked_logprobs(h, w, targets, chunk=256)[0].sum(), argnums=1
            )
        )
        return f.lower(hidden, w).compile().memory_analysis().temp_size_in_bytes

    small, big = temp_bytes(1024), temp_bytes(16384)
    full_logits = 4 * 256 * 16384 * 4  # 64 MiB; the [D, V] weight and its grad are 1 MiB each
    assert big - small < full_logits / 8, (small, big)


def test_sequence_logprobs_alignment_and_padding():
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(1))
    tokens = jnp.array([[5, 7, 9, 11, 13]])
    mask = jnp.ones_like(tokens, bool)
    seq_lp = jax.jit(
        lambda p, t, m: logprobs.sequence_logprobs(p, CFG, t, m, temperature=0.5, chunk=8)[0]
    )
    lp = seq_lp(params, tokens, mask)
    logits, _ = decoder.jit_forward(params, tokens, jnp.arange(5)[None], CFG)
    ref = jax.nn.log_softmax(logits / 0.5, -1)
    expect = [0.0] + [float(ref[0, t - 1, tokens[0, t]]) for t in range(1, 5)]
    np.testing.assert_allclose(lp[0], expect, rtol=1e-5, atol=1e-6)
    # Left and right padding leave the real tokens' log-probs unchanged.
    padded = jnp.array([[0, 0, 5, 7, 9, 11, 13, 0]])
    pmask = padded != 0
    plp = seq_lp(params, padded, pmask)
    np.testing.assert_allclose(plp[0, 3:7], lp[0, 1:], rtol=1e-5, atol=1e-6)


def test_critic_from_policy_is_a_copy_with_zero_head_and_aligned_values():
    cfg = CFG.replace(tie_embeddings=False)
    params = init_params(decoder.decoder_abstract(cfg), jax.random.key(2))
    c = critic.critic_from_policy(params, cfg)
    assert "lm_head" not in c["backbone"]
    assert c["backbone"]["embed"] is not params["embed"]
    np.testing.assert_array_equal(c["backbone"]["embed"], params["embed"])
    tokens = jnp.array([[1, 2, 3, 4]])
    mask = jnp.ones_like(tokens, bool)
    np.testing.assert_array_equal(critic.critic_values(c, cfg, tokens, mask), 0.0)
    c = dict(c, head=jnp.ones(cfg.embed_dim), bias=jnp.float32(0.5))
    v = critic.critic_values(c, cfg, tokens, mask)
    hidden, _ = decoder.forward_hidden(params, tokens, jnp.arange(4)[None], cfg)
    expect = hidden.sum(-1) + 0.5
    np.testing.assert_allclose(v[0, 1:], expect[0, :-1], rtol=1e-5)
    assert float(v[0, 0]) == 0.0


def test_logprobs_at_trained_positions_equal_the_full_rows():
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(2))
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, CFG.vocab_size, (8, 12)).astype(np.int32)
    token_mask = np.arange(12)[None] < rng.integers(6, 13, 8)[:, None]
    loss_mask = token_mask & (rng.random((8, 12)) < 0.5)
    loss_mask[0, 0] = True  # position 0 predicts nothing: 0, as the full rows give it
    loss_mask[1] = False  # a row with no trained token
    at = logprobs.trained_positions(loss_mask, logprobs.position_width(7, 12, floor=4))
    assert at["loss_positions"].shape == (8, 8)
    kw = dict(temperature=0.7, chunk=8, with_entropy=True)
    full_lp, full_ent = logprobs.sequence_logprobs(params, CFG, tokens, token_mask, **kw)
    lp, ent = logprobs.sequence_logprobs(
        params, CFG, tokens, token_mask, at=jnp.asarray(at["loss_positions"]), **kw
    )
    valid = at["loss_valid"]
    r, k = np.nonzero(valid)
    where = at["loss_positions"][r, k]
    np.testing.assert_allclose(lp[r, k], full_lp[r, where], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ent[r, k], full_ent[r, where], rtol=1e-5, atol=1e-6)
    # Scattered back: the trained positions' values, `fill` everywhere else.
    fill = jnp.full(tokens.shape, -9.0)
    back = logprobs.scatter_positions(lp, at["loss_positions"], valid, loss_mask, fill)
    np.testing.assert_allclose(np.where(loss_mask, back, 0), np.where(loss_mask, full_lp, 0),
                               rtol=1e-5, atol=1e-6)  # fmt: skip
    assert np.all(np.where(loss_mask, 0, back + 9.0) == 0)
    # The old / reference pass, in chunks of rows (8 rows, 2 per chunk) and whole.
    for rows_per_device in (2, 8):
        fn = logprobs.make_logprob_fn(
            CFG, temperature=0.7, chunk=8, rows_per_device=rows_per_device
        )
        chunked = fn(params, tokens, token_mask, jnp.asarray(at["loss_positions"]))
        np.testing.assert_allclose(np.where(valid, chunked, 0), np.where(valid, lp, 0),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip


def test_position_width_is_a_few_powers_of_two_and_too_narrow_is_refused():
    assert [logprobs.position_width(n, 2048) for n in (0, 64, 65, 700, 5000)] == [
        64, 64, 128, 1024, 2048
    ]  # fmt: skip
    import pytest

    with pytest.raises(ValueError, match="more than width 2"):
        logprobs.trained_positions(np.ones((1, 4), bool), 2)
