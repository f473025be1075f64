"""The map between Hugging Face tensor names and memjax's decoder parameters.

One table drives loading (HF -> memjax) and export (memjax -> HF). HF stores a linear layer as
[out, in]; memjax stores projections as [in, ...] einsum operands with heads split out:
q_proj.weight [N*Hd, D] <-> q [D, N, Hd], o_proj.weight [D, N*Hd] <-> o [N, Hd, D], and so on.
Parameters under `layers/` are stacked over a leading layer axis; their HF names carry `{i}`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from memjax.models.config import DecoderConfig

Transform = Callable[[np.ndarray, DecoderConfig], np.ndarray]


@dataclasses.dataclass(frozen=True)
class TensorRule:
    param: str  # "/"-path in the memjax tree, e.g. "layers/q"
    hf: str  # HF name; "{i}" is the layer index for stacked parameters
    hf_shape: Callable[[DecoderConfig], tuple[int, ...]]
    to_param: Transform
    to_hf: Transform

    @property
    def stacked(self) -> bool:
        return self.param.startswith("layers/")


def _identity(w, cfg):
    return w


def _transpose(w, cfg):
    return w.T


def _in_heads(heads: Callable[[DecoderConfig], int]) -> tuple[Transform, Transform]:
    """[heads*Hd, D] <-> [D, heads, Hd] (q, k, v projections)."""
    to_param = lambda w, cfg: w.T.reshape(cfg.embed_dim, heads(cfg), cfg.head_dim)
    to_hf = lambda p, cfg: p.reshape(cfg.embed_dim, heads(cfg) * cfg.head_dim).T
    return to_param, to_hf


def _bias(heads: Callable[[DecoderConfig], int]) -> tuple[Transform, Transform]:
    to_param = lambda w, cfg: w.reshape(heads(cfg), cfg.head_dim)
    to_hf = lambda p, cfg: p.reshape(-1)
    return to_param, to_hf


_N = lambda cfg: cfg.num_heads
_K = lambda cfg: cfg.num_kv_heads
_PRE = "model.layers.{i}."


def decoder_rules(cfg: DecoderConfig) -> list[TensorRule]:
    D, F, V = (lambda c: c.embed_dim), (lambda c: c.mlp_dim), (lambda c: c.vocab_size)
    qkv_shape = lambda heads: lambda c: (heads(c) * c.head_dim, c.embed_dim)
    rules = [
        TensorRule(
            "embed", "model.embed_tokens.weight", lambda c: (V(c), D(c)), _identity, _identity
        ),
        TensorRule("final_norm", "model.norm.weight", lambda c: (D(c),), _identity, _identity),
        TensorRule(
            "layers/attn_norm",
            _PRE + "input_layernorm.weight",
            lambda c: (D(c),),
            _identity,
            _identity,
        ),
        TensorRule(
            "layers/mlp_norm",
            _PRE + "post_attention_layernorm.weight",
            lambda c: (D(c),),
            _identity,
            _identity,
        ),
        TensorRule("layers/q", _PRE + "self_attn.q_proj.weight", qkv_shape(_N), *_in_heads(_N)),
        TensorRule("layers/k", _PRE + "self_attn.k_proj.weight", qkv_shape(_K), *_in_heads(_K)),
        TensorRule("layers/v", _PRE + "self_attn.v_proj.weight", qkv_shape(_K), *_in_heads(_K)),
        TensorRule(
            "layers/o",
            _PRE + "self_attn.o_proj.weight",
            lambda c: (c.embed_dim, c.num_heads * c.head_dim),
            lambda w, c: w.T.reshape(c.num_heads, c.head_dim, c.embed_dim),
            lambda p, c: p.reshape(c.num_heads * c.head_dim, c.embed_dim).T,
        ),
        TensorRule(
            "layers/gate",
            _PRE + "mlp.gate_proj.weight",
            lambda c: (F(c), D(c)),
            _transpose,
            _transpose,
        ),
        TensorRule(
            "layers/up", _PRE + "mlp.up_proj.weight", lambda c: (F(c), D(c)), _transpose, _transpose
        ),
        TensorRule(
            "layers/down",
            _PRE + "mlp.down_proj.weight",
            lambda c: (D(c), F(c)),
            _transpose,
            _transpose,
        ),
    ]
    if cfg.qkv_bias:
        for name, heads in (("q", _N), ("k", _K), ("v", _K)):
            rules.append(
                TensorRule(
                    f"layers/{name}_bias",
                    _PRE + f"self_attn.{name}_proj.bias",
                    lambda c, heads=heads: (heads(c) * c.head_dim,),
                    *_bias(heads),
                )
            )
    if not cfg.tie_embeddings:
        rules.append(
            TensorRule("lm_head", "lm_head.weight", lambda c: (V(c), D(c)), _transpose, _transpose)
        )
    return rules
