"""The decoder family (Llama 3.x, Qwen2/2.5) as pure functions over a parameter pytree.

    abstract = decoder_abstract(cfg)                      # ArrayInfo tree
    params = init_params(abstract, key)
    logits, cache = forward(params, tokens, positions, cfg, token_mask=mask)

Layers are stacked on a leading `layers` axis and run with `lax.scan`, so compile time does not
grow with depth. Attention is grouped-query; RoPE uses the rotate-half layout; Qwen2 adds q/k/v
biases; embeddings may be tied. Logits and softmax are always f32.

Parameter layout (L layers, D embed, N heads, K kv heads, Hd head dim, F mlp, V vocab):
    embed            [V, D]
    layers/attn_norm [L, D]        layers/mlp_norm [L, D]
    layers/q         [L, D, N, Hd] layers/q_bias   [L, N, Hd]  (qwen2)
    layers/k, v      [L, D, K, Hd] layers/k_bias, v_bias [L, K, Hd]  (qwen2)
    layers/o         [L, N, Hd, D]
    layers/gate, up  [L, D, F]     layers/down     [L, F, D]
    final_norm       [D]
    lm_head          [D, V]        (untied only)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import KVCache
from memjax.models.params import ArrayInfo, normal_init, ones_init, zeros_init
from memjax.models.rope import apply_rope, inverse_frequencies, rope_tables
from memjax.parallel import constrain

_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)  # finite, so fully padded rows give no NaN


def decoder_abstract(cfg: DecoderConfig) -> dict:
    L, D, N, K, H, F, V = (
        cfg.num_layers,
        cfg.embed_dim,
        cfg.num_heads,
        cfg.num_kv_heads,
        cfg.head_dim,
        cfg.mlp_dim,
        cfg.vocab_size,
    )
    dt = cfg.weight_dtype
    init = normal_init(0.02)
    layers = {
        "attn_norm": ArrayInfo((L, D), dt, ("layers", "norm"), ones_init),
        "q": ArrayInfo((L, D, N, H), dt, ("layers", "embed", "heads", "head_dim"), init),
        "k": ArrayInfo((L, D, K, H), dt, ("layers", "embed", "kv_heads", "head_dim"), init),
        "v": ArrayInfo((L, D, K, H), dt, ("layers", "embed", "kv_heads", "head_dim"), init),
        "o": ArrayInfo((L, N, H, D), dt, ("layers", "heads", "head_dim", "embed"), init),
        "mlp_norm": ArrayInfo((L, D), dt, ("layers", "norm"), ones_init),
        "gate": ArrayInfo((L, D, F), dt, ("layers", "embed", "mlp"), init),
        "up": ArrayInfo((L, D, F), dt, ("layers", "embed", "mlp"), init),
        "down": ArrayInfo((L, F, D), dt, ("layers", "mlp", "embed"), init),
    }
    if cfg.qkv_bias:
        layers["q_bias"] = ArrayInfo((L, N, H), dt, ("layers", "heads", "head_dim"), zeros_init)
        layers["k_bias"] = ArrayInfo((L, K, H), dt, ("layers", "kv_heads", "head_dim"), zeros_init)
        layers["v_bias"] = ArrayInfo((L, K, H), dt, ("layers", "kv_heads", "head_dim"), zeros_init)
    tree = {
        "embed": ArrayInfo((V, D), dt, ("vocab", "embed"), init),
        "layers": layers,
        "final_norm": ArrayInfo((D,), dt, ("norm",), ones_init),
    }
    if not cfg.tie_embeddings:
        tree["lm_head"] = ArrayInfo((D, V), dt, ("embed", "vocab"), init)
    return tree


def rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
    """RMSNorm computed in f32 (as transformers does), returned in x's dtype."""
    xf = x.astype(jnp.float32)
    xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (scale.astype(jnp.float32) * xf).astype(x.dtype)


def attention(q, k, v, mask, cfg: DecoderConfig) -> jax.Array:
    """Grouped-query attention.

    q: [B, T, N, Hd]; k, v: [B, S, K, Hd]; mask: [B, T, S] bool (True = may attend).
    Returns [B, T, N, Hd]. Scores and softmax in f32.
    """
    B, T, N, H = q.shape
    K = k.shape[2]
    q = q.reshape(B, T, K, N // K, H)  # [B, T, K, G, Hd]
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k, preferred_element_type=jnp.float32)
    scores = scores * (H**-0.5)
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASKED)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgts,bskh->btkgh", probs, v)
    return out.reshape(B, T, N, H)


def _layer(x, layer, cos, sin, mask, cache_kv, cache_index, cfg, mesh, rules):
    """One transformer block. x: [B, T, D]. cache_kv: (k, v) [B, S, K, Hd] or None."""
    dt = cfg.dtype
    h = rms_norm(x, layer["attn_norm"], cfg.rms_norm_eps)
    q = jnp.einsum("btd,dnh->btnh", h, layer["q"].astype(dt))
    k = jnp.einsum("btd,dkh->btkh", h, layer["k"].astype(dt))
    v = jnp.einsum("btd,dkh->btkh", h, layer["v"].astype(dt))
    if cfg.qkv_bias:
        q = q + layer["q_bias"].astype(dt)
        k = k + layer["k_bias"].astype(dt)
        v = v + layer["v_bias"].astype(dt)
    q = constrain(q, ("batch", "seq", "heads", None), mesh, rules)
    q = apply_rope(q, cos, sin)
    k = apply_rope(k, cos, sin)
    if cache_kv is not None:
        ck, cv = cache_kv
        ck = jax.lax.dynamic_update_slice_in_dim(ck, k.astype(ck.dtype), cache_index, axis=1)
        cv = jax.lax.dynamic_update_slice_in_dim(cv, v.astype(cv.dtype), cache_index, axis=1)
        attn = attention(q, ck, cv, mask, cfg)
        new_kv = (ck, cv)
    else:
        attn = attention(q, k, v, mask, cfg)
        new_kv = None
    x = x + jnp.einsum("btnh,nhd->btd", attn, layer["o"].astype(dt))
    x = constrain(x, ("batch", "seq", None), mesh, rules)

    h = rms_norm(x, layer["mlp_norm"], cfg.rms_norm_eps)
    gate = jnp.einsum("btd,df->btf", h, layer["gate"].astype(dt))
    up = jnp.einsum("btd,df->btf", h, layer["up"].astype(dt))
    act = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "mlp"), mesh, rules)
    x = x + jnp.einsum("btf,fd->btd", act, layer["down"].astype(dt))
    x = constrain(x, ("batch", "seq", None), mesh, rules)
    return x, new_kv


def _remat(fn, policy: str):
    if policy == "none":
        return fn
    if policy == "full":
        return jax.checkpoint(fn, static_argnums=(7, 8, 9))
    return jax.checkpoint(
        fn,
        policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
        static_argnums=(7, 8, 9),
    )


def forward_hidden(
    params,
    tokens: jax.Array,
    positions: jax.Array,
    cfg: DecoderConfig,
    *,
    token_mask: jax.Array | None = None,
    cache: KVCache | None = None,
    mesh: Mesh | None = None,
    rules=None,
) -> tuple[jax.Array, KVCache | None]:
    """Final-norm hidden states [B, T, D] and the updated cache.

    tokens, positions: [B, T] int32. token_mask: [B, T] bool, False for padding (left or right);
    padded query rows produce garbage that callers mask out, never NaN. With `cache`, the T new
    tokens are written at slots [cache.index, cache.index + T) and attend to every valid slot up
    to their own; without it, attention is causal within the T tokens.
    """
    B, T = tokens.shape
    if token_mask is None:
        token_mask = jnp.ones((B, T), jnp.bool_)
    token_mask = token_mask.astype(jnp.bool_)
    x = params["embed"].astype(cfg.dtype)[tokens]  # [B, T, D]
    x = constrain(x, ("batch", "seq", None), mesh, rules)
    cos, sin = rope_tables(
        positions, inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    )

    if cache is None:
        causal = jnp.tril(jnp.ones((T, T), jnp.bool_))
        mask = causal[None] & token_mask[:, None, :]  # [B, T, T]
        valid = None
    else:
        S = cache.size
        valid = jax.lax.dynamic_update_slice_in_dim(cache.valid, token_mask, cache.index, axis=1)
        slot = jnp.arange(S)[None, :]  # [1, S]
        query_slot = cache.index + jnp.arange(T)[:, None]  # [T, 1]
        mask = (slot <= query_slot)[None] & valid[:, None, :]  # [B, T, S]

    layer_fn = _remat(_layer, cfg.remat)

    if cache is None:

        def body(x, layer):
            x, _ = layer_fn(x, layer, cos, sin, mask, None, None, cfg, mesh, rules)
            return x, None

        x, _ = jax.lax.scan(body, x, params["layers"])
        new_cache = None
    else:

        def body(x, xs):
            layer, ck, cv = xs
            x, (ck, cv) = layer_fn(
                x, layer, cos, sin, mask, (ck, cv), cache.index, cfg, mesh, rules
            )
            return x, (ck, cv)

        x, (k, v) = jax.lax.scan(body, x, (params["layers"], cache.k, cache.v))
        new_cache = KVCache(k=k, v=v, valid=valid, index=cache.index + T)

    x = rms_norm(x, params["final_norm"], cfg.rms_norm_eps)
    return x, new_cache


def unembedding(params, cfg: DecoderConfig) -> jax.Array:
    """[D, V] output projection (the embedding transposed when tied)."""
    return params["embed"].T if cfg.tie_embeddings else params["lm_head"]


def logits_from_hidden(params, hidden: jax.Array, cfg: DecoderConfig) -> jax.Array:
    """[B, T, D] -> [B, T, V] f32 logits."""
    w = unembedding(params, cfg).astype(cfg.dtype)
    return jnp.einsum("btd,dv->btv", hidden, w, preferred_element_type=jnp.float32)


def forward(params, tokens, positions, cfg: DecoderConfig, **kwargs):
    """Logits [B, T, V] (f32) and the updated cache (None without one)."""
    hidden, cache = forward_hidden(params, tokens, positions, cfg, **kwargs)
    return logits_from_hidden(params, hidden, cfg), cache


def positions_from_mask(token_mask: jax.Array, offset: jax.Array | int = 0) -> jax.Array:
    """Positions [B, T] counting only real tokens (left padding gets position 0)."""
    pos = jnp.cumsum(token_mask.astype(jnp.int32), axis=-1) - 1 + offset
    return jnp.maximum(pos, 0)


jit_forward = jax.jit(forward, static_argnames=("cfg", "mesh", "rules"))
__all__ = [
    "decoder_abstract",
    "forward",
    "forward_hidden",
    "logits_from_hidden",
    "unembedding",
    "positions_from_mask",
    "rms_norm",
    "attention",
    "jit_forward",
]
