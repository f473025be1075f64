"""Fused attention against the XLA path on the 8-device fake CPU mesh (f32, within 1e-5).

Splash attention runs in Pallas' interpreter on CPU (the TPU kernel's own code, interpreted);
cuDNN needs an NVIDIA GPU, so on CPU its row rotation runs around XLA's causal attention (the
same call with implementation="xla"), and tests/scale/test_aot_gpu.py compiles the kernel. Batches mix a left-padded
and a right-padded row: outputs are compared on real tokens (padding rows are garbage that
callers mask out, in every implementation) and gradients everywhere.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.models import decoder, fused_attention
from memjax.models.config import DecoderConfig
from memjax.models.params import init_params
from memjax.parallel import TRAIN_RULES, make_mesh, normalize_rules, shard_params

RULES = normalize_rules(TRAIN_RULES)


def _mesh():
    return make_mesh({"data": 2, "fsdp": 2, "tensor": 2})


def _token_mask(B: int, T: int) -> jnp.ndarray:
    m = np.ones((B, T), bool)
    m[0::2, : T // 4] = False  # left padding
    m[1::2, T - T // 3 :] = False  # right padding
    return jnp.asarray(m)


def test_implementation_by_platform_and_by_name():
    assert fused_attention.resolve("", None) == "xla"  # CPU
    assert fused_attention.resolve("splash", None) == "splash"
    with pytest.raises(ValueError, match="model.attention='flash'"):
        fused_attention.resolve("flash", None)
    with pytest.raises(ValueError, match="attention='flash'"):
        DecoderConfig("llama", 8, 8, 8, 1, 2, 1, 4, attention="flash")


@pytest.mark.parametrize("with_mesh", [False, True])
def test_splash_equals_xla_values_and_gradients(with_mesh):
    B, T, N, K, H = 4, 40, 4, 2, 32  # T pads to the kernel's 128-token tiles
    keys = jax.random.split(jax.random.key(1), 4)
    q = jax.random.normal(keys[0], (B, T, N, H))
    k = jax.random.normal(keys[1], (B, T, K, H))
    v = jax.random.normal(keys[2], (B, T, K, H))
    token_mask = _token_mask(B, T)
    w = jax.random.normal(keys[3], (B, T, N, H)) * token_mask[:, :, None, None]
    mask = jnp.tril(jnp.ones((T, T), bool))[None] & token_mask[:, None, :]
    mesh = _mesh() if with_mesh else None

    xla = lambda q, k, v: decoder.xla_attention(q, k, v, mask)
    splash = lambda q, k, v: fused_attention.splash_attention(
        q, k, v, token_mask, mesh=mesh, rules=RULES
    )
    assert_same_attention(splash, xla, (q, k, v), token_mask, w)


def test_cudnn_rotation_equals_xla_values_and_gradients():
    """cuDNN gets no padding mask: each row is rotated so its padding follows its real tokens,
    where the causal mask alone keeps real queries from it."""
    B, T, N, K, H = 4, 24, 4, 2, 8
    keys = jax.random.split(jax.random.key(2), 4)
    q = jax.random.normal(keys[0], (B, T, N, H))
    k = jax.random.normal(keys[1], (B, T, K, H))
    v = jax.random.normal(keys[2], (B, T, K, H))
    token_mask = _token_mask(B, T).at[3, :].set(True)  # and a row with no padding
    w = jax.random.normal(keys[3], (B, T, N, H)) * token_mask[:, :, None, None]
    mask = jnp.tril(jnp.ones((T, T), bool))[None] & token_mask[:, None, :]
    xla = lambda q, k, v: decoder.xla_attention(q, k, v, mask)
    rotated = lambda q, k, v: fused_attention.cudnn_attention(
        q, k, v, token_mask, implementation="xla"
    )
    assert_same_attention(rotated, xla, (q, k, v), token_mask, w)


def assert_same_attention(ours, ref, args, token_mask, w) -> None:
    """Two attentions over `args`: outputs on real tokens, and the gradients of sum(out * w)
    (w zero on padding queries) to every argument, within 1e-5."""
    real = token_mask[:, :, None, None]
    np.testing.assert_allclose(
        jnp.where(real, ours(*args), 0), jnp.where(real, ref(*args), 0), atol=1e-5
    )
    grad = lambda f: jax.jit(jax.grad(lambda *a: (f(*a) * w).sum(), tuple(range(len(args)))))
    for a, b in zip(grad(ours)(*args), grad(ref)(*args)):
        np.testing.assert_allclose(a, b, atol=1e-5)


def _tiny(attention: str) -> DecoderConfig:
    return DecoderConfig(
        "qwen2", vocab_size=64, embed_dim=32, mlp_dim=64, num_layers=2, num_heads=4,
        num_kv_heads=2, head_dim=8, qkv_bias=True, tie_embeddings=True, attention=attention,
        remat="full",
    )  # fmt: skip


@pytest.mark.heavy  # the Pallas interpreter runs the kernel's grid step by step
def test_decoder_with_splash_equals_xla_on_a_mesh():
    """Logits on real tokens and the parameter gradients of a masked loss, through the
    layer scan, remat and the sharding constraints of training."""
    B, T = 4, 24
    mesh = _mesh()
    cfg_x, cfg_s = _tiny("xla"), _tiny("splash")
    params = shard_params(
        init_params(decoder.decoder_abstract(cfg_x), jax.random.key(0)),
        decoder.decoder_abstract(cfg_x),
        mesh,
        RULES,
    )
    tokens = jax.random.randint(jax.random.key(2), (B, T), 0, 64)
    token_mask = _token_mask(B, T)
    positions = decoder.positions_from_mask(token_mask)

    def loss(params, cfg):
        logits, _ = decoder.forward(
            params, tokens, positions, cfg, token_mask=token_mask, mesh=mesh, rules=RULES
        )
        logp = jax.nn.log_softmax(logits)[..., 0]
        return jnp.where(token_mask, logp, 0).sum(), logits

    run = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=1)
    assert_same_decoder_runs(run(params, cfg_s), run(params, cfg_x), token_mask)


def assert_same_decoder_runs(ours, ref, token_mask) -> None:
    """Two ((loss, logits), grads) of a masked decoder loss: logits on real tokens and the
    parameter gradients within 1e-5, the loss within 1e-6 relative."""
    (loss_a, logits_a), grads_a = ours
    (loss_b, logits_b), grads_b = ref
    real = token_mask[:, :, None]
    np.testing.assert_allclose(
        jnp.where(real, logits_a, 0), jnp.where(real, logits_b, 0), atol=1e-5
    )
    np.testing.assert_allclose(loss_a, loss_b, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b)):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.heavy
def test_sampler_prefill_with_splash_equals_xla():
    """A first prefill through splash (attention among the prompt tokens, then one cache
    write) gives the XLA cached path's logits and cache entries on every valid slot."""
    from memjax.sampling import loop

    B, T = 2, 16
    cfg_x, cfg_s = _tiny("xla"), _tiny("splash")
    params = init_params(decoder.decoder_abstract(cfg_x), jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(3), (B, T), 0, 64)
    mask = jnp.asarray(np.arange(T)[None, :] >= np.array([[5], [0]]))  # left-padded prompts
    positions = decoder.positions_from_mask(mask)
    out = {
        name: loop.prefill_new(
            params, tokens, mask, positions, cfg=cfg, cache_size=128, per_layer=False, group_size=2
        )
        for name, cfg in (("xla", cfg_x), ("splash", cfg_s))
    }
    (lx, cx), (ls, cs) = out["xla"], out["splash"]
    np.testing.assert_allclose(ls, lx, atol=1e-5)
    np.testing.assert_array_equal(cs.valid, cx.valid)
    assert int(cs.index) == int(cx.index) == T
    valid = cx.valid[None, :, None, :, None]  # [1, B*G, 1, S, 1]
    for a, b in ((cs.k, cx.k), (cs.v, cx.v)):
        np.testing.assert_allclose(jnp.where(valid, a, 0), jnp.where(valid, b, 0), atol=1e-5)
