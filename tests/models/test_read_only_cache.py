"""forward_hidden over a cache it only reads (a shared prompt's keys, memjax.models.shared_prefix):
the hidden states of the writing call, over a cache with no slots for the new tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import init_cache, repeat_rows
from memjax.models.params import init_params

CFG = DecoderConfig(
    "llama", vocab_size=64, embed_dim=32, mlp_dim=64, num_layers=2, num_heads=4,
    num_kv_heads=2, head_dim=8, tie_embeddings=True, attention_query_block=4,
)  # fmt: skip


def _prefilled(params, P: int, size: int, B: int):
    """A cache of `size` slots holding P prompt tokens (the last 2 padding), repeated B times."""
    prompt = jax.random.randint(jax.random.key(1), (1, P), 0, 64)
    real = jnp.arange(P)[None] < P - 2
    _, cache = decoder.forward_hidden(
        params, prompt, jnp.arange(P)[None], CFG, token_mask=real,
        cache=init_cache(CFG, 1, size), fresh_cache=True,
    )  # fmt: skip
    return repeat_rows(cache, B)


def test_reading_a_prompt_only_cache_gives_the_writing_calls_states():
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(0))
    B, P, T = 3, 8, 10
    tokens = jax.random.randint(jax.random.key(2), (B, T), 0, 64)
    token_mask = jnp.asarray(np.arange(T)[None, :] < np.array([[T], [7], [4]]))  # right-padded
    positions = decoder.positions_from_mask(token_mask, offset=P - 2)

    def run(cache, read_only):
        return decoder.forward_hidden(
            params, tokens, positions, CFG, token_mask=token_mask, cache=cache,
            read_only_cache=read_only,
        )  # fmt: skip

    written, _ = run(_prefilled(params, P, P + T, B), False)
    prompt_only = _prefilled(params, P, P, B)
    read, returned = run(prompt_only, True)
    real = token_mask[:, :, None]
    np.testing.assert_allclose(jnp.where(real, read, 0), jnp.where(real, written, 0), atol=1e-5)
    for a, b in zip(jax.tree.leaves(returned), jax.tree.leaves(prompt_only)):
        np.testing.assert_array_equal(a, b)


def test_a_per_layer_cache_cannot_be_read_only():
    params = decoder.unstack_layers(init_params(decoder.decoder_abstract(CFG), jax.random.key(0)))
    cache = init_cache(CFG, 1, 8, per_layer=True)
    with pytest.raises(ValueError, match="read-only"):
        decoder.forward_hidden(
            params, jnp.zeros((1, 2), jnp.int32), jnp.zeros((1, 2), jnp.int32), CFG,
            cache=cache, read_only_cache=True,
        )  # fmt: skip
