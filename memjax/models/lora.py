"""Low-rank adapters on the decoder's projections, as a parameter tree beside the frozen base.

    cfg = cfg.replace(lora=LoraConfig(rank=16, alpha=32, targets=("q", "v")))
    adapters = init_params(lora_abstract(cfg), key)        # {"layers": {"q": {"a", "b"}, ...}}
    logits, _ = forward(with_adapters(base, adapters), tokens, positions, cfg)
    logits_ref, _ = forward(base, tokens, positions, cfg)   # adapters off: the same base
    merged = merge_adapters(base, adapters, cfg)            # W + s A B, for sampling and export

Layout (L layers, r rank; a projection's weight is [L, *in, *out] as in `decoder_abstract`):
    layers/lora/<target>/a   [L, *in, r]    Kaiming-uniform (PEFT's default), adapters' dtype
    layers/lora/<target>/b   [L, r, *out]   zero, so at initialisation the model is the base
`in` is (D,) for q, k, v, gate, up; (N, Hd) for o; (F,) for down. The adapters ride in the
layers dict under "lora", so `lax.scan`, `unstack_layers` and shardings slice them with their
layer; `decoder._project` adds s (x A) B (`memjax.models.low_rank`) where a layer carries them.
The rank axis has no logical name (replicated): the adapters are small, and A's input axis and
B's output axis are sharded like the base weight's.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.lora_config import LORA_TARGETS, LoraConfig, lora_config_from
from memjax.models.low_rank import ADAPTERS_KEY
from memjax.models.params import ArrayInfo, zeros_init

# How many of a base weight's axes (after `layers`) are its input: o is [L, N, Hd, D].
_INPUT_AXES = {"o": 2}


def _kaiming_uniform(fan_in: int):
    """PEFT's A: kaiming_uniform_(a=sqrt(5)) on a Linear(fan_in, r), i.e. U(+-1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in)

    def init(key, shape, dtype):
        return jax.random.uniform(key, shape, jnp.float32, -bound, bound).astype(dtype)

    return init


def _require(cfg: DecoderConfig) -> LoraConfig:
    if cfg.lora is None:
        raise ValueError("DecoderConfig.lora is None: set cfg.replace(lora=LoraConfig(...))")
    return cfg.lora


def adapter_pair_abstract(base: ArrayInfo, target: str, lora: LoraConfig) -> dict:
    """A and B for one stacked base weight [L, *in, *out]."""
    n_in = _INPUT_AXES.get(target, 1)
    L, shape, axes = base.shape[0], base.shape[1:], base.logical_axes[1:]
    fan_in = math.prod(shape[:n_in])
    dt = lora.weight_dtype
    return {
        "a": ArrayInfo(
            (L, *shape[:n_in], lora.rank),
            dt,
            ("layers", *axes[:n_in], None),
            _kaiming_uniform(fan_in),
        ),
        "b": ArrayInfo(
            (L, lora.rank, *shape[n_in:]), dt, ("layers", None, *axes[n_in:]), zeros_init
        ),
    }


def lora_abstract(cfg: DecoderConfig) -> dict:
    """The adapters' ArrayInfo tree: {"layers": {target: {"a", "b"}}}."""
    lora = _require(cfg)
    layers = decoder_abstract(cfg)["layers"]
    return {"layers": {t: adapter_pair_abstract(layers[t], t, lora) for t in lora.targets}}


def with_adapters(base, adapters) -> dict:
    """The tree `forward` runs with the adapters on: the base's arrays (not copied) and the
    adapters under layers/lora. Works for stacked layers and for `unstack_layers` lists."""
    layers = base["layers"]
    lora_layers = adapters["layers"]
    if isinstance(layers, (list, tuple)):
        num = len(layers)
        per_layer = [jax.tree.map(lambda a, i=i: a[i], lora_layers) for i in range(num)]
        return {**base, "layers": [{**lay, ADAPTERS_KEY: p} for lay, p in zip(layers, per_layer)]}
    return {**base, "layers": {**layers, ADAPTERS_KEY: lora_layers}}


def adapters_off(params) -> dict:
    """The base alone (the KL reference): `params` without its adapters, arrays shared."""
    layers = params["layers"]
    if isinstance(layers, (list, tuple)):
        return {**params, "layers": [_without(lay) for lay in layers]}
    return {**params, "layers": _without(layers)}


def _without(layer: dict) -> dict:
    return {k: v for k, v in layer.items() if k != ADAPTERS_KEY}


def delta_weight(pair: dict, scale: float) -> jax.Array:
    """s A B in the base weight's own shape [L, *in, *out] (f32)."""
    a, b = pair["a"].astype(jnp.float32), pair["b"].astype(jnp.float32)
    L, r = a.shape[0], a.shape[-1]
    in_shape, out_shape = a.shape[1:-1], b.shape[2:]
    ab = jnp.einsum("lir,lro->lio", a.reshape(L, -1, r), b.reshape(L, r, -1))
    return (scale * ab).reshape(L, *in_shape, *out_shape)


def merge_adapters(base, adapters, cfg: DecoderConfig) -> dict:
    """The base with W + s A B on every target (computed in f32, stored in W's dtype); other
    arrays are the base's own. Stacked layers only (merge before `unstack_layers`)."""
    lora = _require(cfg)
    layers = dict(base["layers"])
    for target, pair in adapters["layers"].items():
        w = layers[target]
        layers[target] = (w.astype(jnp.float32) + delta_weight(pair, lora.scale)).astype(w.dtype)
    return {**base, "layers": layers}


jit_merge_adapters = jax.jit(merge_adapters, static_argnames=("cfg",))

__all__ = [
    "LORA_TARGETS",
    "LoraConfig",
    "lora_config_from",
    "lora_abstract",
    "adapter_pair_abstract",
    "with_adapters",
    "adapters_off",
    "delta_weight",
    "merge_adapters",
    "jit_merge_adapters",
]
