"""The BERT-family text encoder (MiniLM, E5, BGE) as pure functions over a parameter pytree.

    abstract = encoder_abstract(cfg)                         # ArrayInfo tree
    params = init_params(abstract, key)
    hidden = forward(params, tokens, token_mask, cfg)        # [B, T, D]
    vectors = embed(params, tokens, token_mask, cfg, recipe) # [B, D] f32

Post-LayerNorm blocks (BERT's order), exact-erf GELU by default, absolute position embeddings.
Layers are stacked on a leading `layers` axis and run with `lax.scan`. LayerNorm statistics,
softmax and pooling are f32 whatever the compute dtype.

Parameter layout (L layers, D embed, N heads, Hd head dim, F mlp, V vocab, P positions, S types):
    embed/word [V, D]  embed/position [P, D]  embed/token_type [S, D]  embed/norm_{scale,bias} [D]
    layers/q, k, v [L, D, N, Hd]   layers/q_bias, k_bias, v_bias [L, N, Hd]
    layers/o [L, N, Hd, D]         layers/o_bias [L, D]
    layers/attn_norm_{scale,bias} [L, D]
    layers/mlp_in [L, D, F]  layers/mlp_in_bias [L, F]  layers/mlp_out [L, F, D]
    layers/mlp_out_bias [L, D]     layers/mlp_norm_{scale,bias} [L, D]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from memjax.models.encoder_config import EmbeddingRecipe, EncoderConfig
from memjax.models.params import ArrayInfo, normal_init, ones_init, zeros_init
from memjax.parallel import constrain

_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)  # finite: fully padded rows give no NaN


def encoder_abstract(cfg: EncoderConfig) -> dict:
    L, D, N, H, F = cfg.num_layers, cfg.embed_dim, cfg.num_heads, cfg.head_dim, cfg.mlp_dim
    dt = cfg.weight_dtype
    init = normal_init(0.02)

    def vec(shape, axes, fn=zeros_init):
        return ArrayInfo(shape, dt, axes, fn)

    embed = {
        "word": ArrayInfo((cfg.vocab_size, D), dt, ("vocab", "embed"), init),
        "position": ArrayInfo((cfg.max_position_embeddings, D), dt, (None, "embed"), init),
        "token_type": ArrayInfo((cfg.type_vocab_size, D), dt, (None, "embed"), init),
        "norm_scale": vec((D,), ("norm",), ones_init),
        "norm_bias": vec((D,), ("norm",)),
    }
    qkv_axes = ("layers", "embed", "heads", "head_dim")
    layers = {
        "q": ArrayInfo((L, D, N, H), dt, qkv_axes, init),
        "k": ArrayInfo((L, D, N, H), dt, qkv_axes, init),
        "v": ArrayInfo((L, D, N, H), dt, qkv_axes, init),
        "q_bias": vec((L, N, H), ("layers", "heads", "head_dim")),
        "k_bias": vec((L, N, H), ("layers", "heads", "head_dim")),
        "v_bias": vec((L, N, H), ("layers", "heads", "head_dim")),
        "o": ArrayInfo((L, N, H, D), dt, ("layers", "heads", "head_dim", "embed"), init),
        "o_bias": vec((L, D), ("layers", "norm")),
        "attn_norm_scale": vec((L, D), ("layers", "norm"), ones_init),
        "attn_norm_bias": vec((L, D), ("layers", "norm")),
        "mlp_in": ArrayInfo((L, D, F), dt, ("layers", "embed", "mlp"), init),
        "mlp_in_bias": vec((L, F), ("layers", "mlp")),
        "mlp_out": ArrayInfo((L, F, D), dt, ("layers", "mlp", "embed"), init),
        "mlp_out_bias": vec((L, D), ("layers", "norm")),
        "mlp_norm_scale": vec((L, D), ("layers", "norm"), ones_init),
        "mlp_norm_bias": vec((L, D), ("layers", "norm")),
    }
    return {"embed": embed, "layers": layers}


def layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array, eps: float) -> jax.Array:
    """LayerNorm with f32 statistics, returned in x's dtype."""
    xf = x.astype(jnp.float32)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=-1, keepdims=True)
    y = (xf - mean) * jax.lax.rsqrt(var + eps)
    return (y * scale.astype(jnp.float32) + bias.astype(jnp.float32)).astype(x.dtype)


def _gelu(x: jax.Array, kind: str) -> jax.Array:
    return jax.nn.gelu(x, approximate=kind != "gelu")


def _block(x, layer, mask, cfg: EncoderConfig, mesh, rules):
    """One post-LN BERT block. x: [B, T, D]; mask: [B, T] bool (True = real token)."""
    dt = cfg.dtype
    q = jnp.einsum("btd,dnh->btnh", x, layer["q"].astype(dt)) + layer["q_bias"].astype(dt)
    k = jnp.einsum("btd,dnh->btnh", x, layer["k"].astype(dt)) + layer["k_bias"].astype(dt)
    v = jnp.einsum("btd,dnh->btnh", x, layer["v"].astype(dt)) + layer["v_bias"].astype(dt)
    q = constrain(q, ("batch", "seq", "heads", None), mesh, rules)
    scores = jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=jnp.float32)  # [B,N,T,T]
    scores = scores * (cfg.head_dim**-0.5)
    scores = jnp.where(mask[:, None, None, :], scores, _MASKED)
    probs = jax.nn.softmax(scores, axis=-1).astype(dt)
    attn = jnp.einsum("bnts,bsnh->btnh", probs, v)  # [B, T, N, Hd]
    out = jnp.einsum("btnh,nhd->btd", attn, layer["o"].astype(dt)) + layer["o_bias"].astype(dt)
    x = layer_norm(x + out, layer["attn_norm_scale"], layer["attn_norm_bias"], cfg.layer_norm_eps)
    x = constrain(x, ("batch", "seq", None), mesh, rules)

    h = jnp.einsum("btd,df->btf", x, layer["mlp_in"].astype(dt)) + layer["mlp_in_bias"].astype(dt)
    h = constrain(_gelu(h, cfg.hidden_act), ("batch", "seq", "mlp"), mesh, rules)  # [B, T, F]
    out = jnp.einsum("btf,fd->btd", h, layer["mlp_out"].astype(dt))
    out = out + layer["mlp_out_bias"].astype(dt)
    x = layer_norm(x + out, layer["mlp_norm_scale"], layer["mlp_norm_bias"], cfg.layer_norm_eps)
    return constrain(x, ("batch", "seq", None), mesh, rules)


def forward(
    params,
    tokens: jax.Array,
    token_mask: jax.Array,
    cfg: EncoderConfig,
    *,
    token_types: jax.Array | None = None,
    mesh: Mesh | None = None,
    rules=None,
) -> jax.Array:
    """Last hidden states [B, T, D] (compute dtype).

    tokens: [B, T] int32, right padded; token_mask: [B, T] bool (False for padding). Positions
    are 0..T-1, as BERT numbers them for right-padded batches. token_types default to 0."""
    B, T = tokens.shape
    if cfg.max_position_embeddings < T:
        raise ValueError(f"sequence length {T} exceeds max_position_embeddings")
    mask = token_mask.astype(jnp.bool_)
    if token_types is None:
        token_types = jnp.zeros((B, T), jnp.int32)
    e = params["embed"]
    x = e["word"][tokens] + e["position"][:T][None] + e["token_type"][token_types]  # [B, T, D]
    x = layer_norm(x, e["norm_scale"], e["norm_bias"], cfg.layer_norm_eps).astype(cfg.dtype)
    x = constrain(x, ("batch", "seq", None), mesh, rules)

    def body(x, layer):
        return _block(x, layer, mask, cfg, mesh, rules), None

    x, _ = jax.lax.scan(body, x, params["layers"])
    return x


def pool(hidden: jax.Array, token_mask: jax.Array, recipe: EmbeddingRecipe) -> jax.Array:
    """[B, T, D] -> [B, D] f32: mean over real tokens or the first ([CLS]) token, then
    optionally L2-normalised (with sentence-transformers' 1e-12 floor on the norm)."""
    h = hidden.astype(jnp.float32)
    if recipe.pooling == "cls":
        out = h[:, 0]
    else:
        m = token_mask.astype(jnp.float32)[..., None]  # [B, T, 1]
        out = jnp.sum(h * m, axis=1) / jnp.maximum(jnp.sum(m, axis=1), 1e-9)
    if recipe.normalize:
        out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out


def embed(
    params,
    tokens: jax.Array,
    token_mask: jax.Array,
    cfg: EncoderConfig,
    recipe: EmbeddingRecipe,
    mesh: Mesh | None = None,
    rules=None,
) -> jax.Array:
    """One vector per text: [B, T] tokens -> [B, D] f32."""
    hidden = forward(params, tokens, token_mask, cfg, mesh=mesh, rules=rules)
    return pool(hidden, token_mask, recipe)


jit_embed = jax.jit(embed, static_argnames=("cfg", "recipe", "mesh", "rules"))

__all__ = ["encoder_abstract", "forward", "pool", "embed", "jit_embed", "layer_norm"]
