"""Causal attention by query blocks (decoder.causal_attention) against the whole square.

Batches mix left- and right-padded rows; outputs are compared on real tokens (a padding
query's output is never read) and gradients with a loss that weights real tokens only.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.models import decoder
from memjax.models.config import ConfigError, DecoderConfig
from memjax.models.params import init_params
from tests.models.test_fused_attention import (
    _token_mask,
    assert_same_attention,
    assert_same_decoder_runs,
)


@pytest.mark.parametrize("query_block", [7, 16])
def test_blocks_equal_the_whole_square(query_block):
    B, T, N, K, H = 4, 37, 6, 2, 8  # T not a multiple of most blocks: a short last block
    keys = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(keys[0], (B, T, N, H))
    k = jax.random.normal(keys[1], (B, T, K, H))
    v = jax.random.normal(keys[2], (B, T, K, H))
    token_mask = _token_mask(B, T)
    mask = jnp.tril(jnp.ones((T, T), bool))[None] & token_mask[:, None, :]
    w = jax.random.normal(keys[3], (B, T, N, H)) * token_mask[:, :, None, None]

    whole = lambda q, k, v: decoder.xla_attention(q, k, v, mask)
    blocks = lambda q, k, v: decoder.causal_attention(q, k, v, mask, query_block)
    assert_same_attention(blocks, whole, (q, k, v), token_mask, w)


def test_blocks_after_a_cache_equal_one_piece():
    """cached_attention (a shared prompt's keys, then the row's own tokens) by query blocks
    against one piece: values on real queries and gradients to q, the new and the cached
    keys and values."""
    B, S, T, N, K, H = 4, 11, 29, 6, 2, 8
    query_block = 5
    keys = jax.random.split(jax.random.key(2), 6)
    q = jax.random.normal(keys[0], (B, T, N, H))
    k_new, v_new = (jax.random.normal(keys[i], (B, K, T, H)) for i in (1, 2))
    k_old, v_old = (jax.random.normal(keys[i], (B, K, S, H)) for i in (3, 4))
    old_valid = jnp.asarray(np.arange(S)[None, :] >= np.array([[0], [3], [0], [6]]))  # [B, S]
    token_mask = _token_mask(B, T)
    new_mask = jnp.tril(jnp.ones((T, T), bool))[None] & token_mask[:, None, :]
    w = jax.random.normal(keys[5], (B, T, N, H)) * token_mask[:, :, None, None]

    def attend(block):
        return lambda *a: decoder.cached_attention(*a[:3], new_mask, *a[3:], old_valid, block)

    args = (q, k_new, v_new, k_old, v_old)
    assert_same_attention(attend(query_block), attend(0), args, token_mask, w)


def test_decoder_logits_and_gradients_do_not_depend_on_the_block():
    """Through the layer scan and remat: block 8 over 24 tokens against one piece (block 0)."""
    cfg = DecoderConfig(
        "llama", vocab_size=64, embed_dim=32, mlp_dim=64, num_layers=2, num_heads=4,
        num_kv_heads=2, head_dim=8, tie_embeddings=True, remat="full", attention="xla",
    )  # fmt: skip
    params = init_params(decoder.decoder_abstract(cfg), jax.random.key(0))
    B, T = 4, 24
    tokens = jax.random.randint(jax.random.key(1), (B, T), 0, 64)
    token_mask = _token_mask(B, T)
    positions = decoder.positions_from_mask(token_mask)

    def loss(params, cfg):
        logits, _ = decoder.forward(params, tokens, positions, cfg, token_mask=token_mask)
        logp = jax.nn.log_softmax(logits)[..., 0]  # [B, T]
        return jnp.where(token_mask, logp, 0).sum(), logits

    run = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)
    blocks = run(params, cfg.replace(attention_query_block=8))
    one_piece = run(params, cfg.replace(attention_query_block=0))
    assert_same_decoder_runs(blocks, one_piece, token_mask)


def test_a_negative_block_is_a_config_error():
    with pytest.raises(ConfigError, match="attention_query_block=-1"):
        DecoderConfig("llama", 8, 8, 8, 1, 2, 1, 4, attention_query_block=-1)
