"""The frozen KL reference: half the bytes of f32 master weights, the same log-probs."""

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract, forward
from memjax.models.frozen import frozen_copy
from memjax.models.params import flatten_with_names, init_params

CFG = DecoderConfig(
    "qwen2",
    vocab_size=64,
    embed_dim=32,
    mlp_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    qkv_bias=True,
    tie_embeddings=False,
    param_dtype="float32",
    compute_dtype="bfloat16",
)


def _params():
    params = init_params(decoder_abstract(CFG), jax.random.key(0))
    # Norm scales away from one, so that keeping them in f32 is what the test checks.
    return jax.tree_util.tree_map_with_path(
        lambda path, x: (
            x + 0.013 * (1 + jnp.arange(x.size).reshape(x.shape) % 7)
            if "norm" in jax.tree_util.keystr(path)
            else x
        ),
        params,
    )


def test_the_reference_reads_as_the_master_weights_in_half_the_bytes():
    params = _params()
    ref = frozen_copy(params, CFG.dtype)
    dtypes = {n: x.dtype for n, x in flatten_with_names(ref).items()}
    assert dtypes["final_norm"] == jnp.float32 and dtypes["layers/attn_norm"] == jnp.float32
    assert dtypes["layers/q"] == jnp.bfloat16 and dtypes["lm_head"] == jnp.bfloat16
    assert dtypes["layers/q_bias"] == jnp.bfloat16 and dtypes["embed"] == jnp.bfloat16
    size = lambda t: sum(x.nbytes for x in jax.tree.leaves(t))
    assert size(ref) < 0.52 * size(params)
    tokens = jax.random.randint(jax.random.key(1), (3, 12), 0, CFG.vocab_size)
    positions = jnp.broadcast_to(jnp.arange(12), (3, 12))
    master, _ = forward(params, tokens, positions, CFG)
    frozen, _ = forward(ref, tokens, positions, CFG)
    np.testing.assert_array_equal(np.asarray(master), np.asarray(frozen))


def test_f32_compute_keeps_f32_weights():
    params = _params()
    ref = frozen_copy(params, "float32")
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(ref))
    assert all(a is not b for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(params)))
