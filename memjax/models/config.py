"""DecoderConfig: the hyperparameters of the Llama 3.x / Qwen2 decoder family.

Built from a Hugging Face `config.json` (`from_hf_dict`) or from GGUF metadata
(`memjax.checkpoints.gguf_io`). Frozen and hashable, so it can be a static argument of `jax.jit`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from memjax import errors
from memjax.model_errors import WeightsNotFoundError
from memjax.models.lora_config import LoraConfig

SUPPORTED_MODEL_TYPES = ("llama", "qwen2")

_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


class ConfigError(errors.ConfigError):
    """A model config (config.json, GGUF metadata, overrides) with a bad or unsupported value."""


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's frequency correction (`rope_type: llama3`)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclasses.dataclass(frozen=True)
class DecoderConfig:
    model_type: str  # "llama" or "qwen2"
    vocab_size: int
    embed_dim: int  # hidden_size
    mlp_dim: int  # intermediate_size
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | None = None
    qkv_bias: bool = False
    tie_embeddings: bool = False
    max_position_embeddings: int = 4096
    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    remat: str = "none"  # "none" | "full" | "dots" (save matmul outputs only)
    attention: str = ""  # "xla" | "splash" | "cudnn"; "" = by platform (fused_attention.py)
    # The XLA attention's query block (decoder.causal_attention): each block of this many
    # queries scores only the keys up to its end, skipping the causal mask's upper triangle
    # (about half the scores at long T). 0 scores the whole square in one piece.
    attention_query_block: int = 256
    # Low-rank adapters (memjax.models.lora): the forward applies those a parameter tree carries,
    # at this config's scale; the base tree and its checkpoints are the same with or without.
    lora: LoraConfig | None = None

    def __post_init__(self):
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ConfigError(
                f"model_type {self.model_type!r} is not supported; memjax's decoder covers "
                f"{SUPPORTED_MODEL_TYPES}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ConfigError(
                f"num_attention_heads={self.num_heads} is not a multiple of "
                f"num_key_value_heads={self.num_kv_heads}"
            )
        for field in ("param_dtype", "compute_dtype"):
            if getattr(self, field) not in _DTYPES:
                raise ConfigError(f"{field}={getattr(self, field)!r}; choose from {list(_DTYPES)}")
        if self.remat not in ("none", "full", "dots"):
            raise ConfigError(f"remat={self.remat!r}; choose from none, full, dots")
        if self.attention_query_block < 0:
            raise ConfigError(f"attention_query_block={self.attention_query_block}; must be >= 0")
        if self.attention not in ("", "xla", "splash", "cudnn"):
            raise ConfigError(
                f"attention={self.attention!r}; choose from xla, splash, cudnn ('' = by platform)"
            )

    @property
    def dtype(self):
        return _DTYPES[self.compute_dtype]

    @property
    def weight_dtype(self):
        return _DTYPES[self.param_dtype]

    def replace(self, **changes) -> DecoderConfig:
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- Hugging Face config.json

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], source: str = "config.json", **overrides):
        model_type = hf.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ConfigError(
                f"{source}: model_type {model_type!r} (architectures {hf.get('architectures')}) "
                f"is not supported; memjax's decoder covers {SUPPORTED_MODEL_TYPES}"
            )
        if hf.get("use_sliding_window"):
            raise ConfigError(f"{source}: use_sliding_window=true is not supported")
        try:
            num_heads = int(hf["num_attention_heads"])
            embed = int(hf["hidden_size"])
            kwargs = dict(
                model_type=model_type,
                vocab_size=int(hf["vocab_size"]),
                embed_dim=embed,
                mlp_dim=int(hf["intermediate_size"]),
                num_layers=int(hf["num_hidden_layers"]),
                num_heads=num_heads,
                num_kv_heads=int(hf.get("num_key_value_heads") or num_heads),
                head_dim=int(hf.get("head_dim") or embed // num_heads),
            )
        except KeyError as e:
            raise ConfigError(f"{source}: missing field {e.args[0]!r}") from None
        # transformers >= 5 writes `rope_parameters` (with rope_theta inside); files in the wild
        # write `rope_scaling` and a top-level `rope_theta`. Read both.
        rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
        theta = hf.get("rope_theta", rope.get("rope_theta", 10000.0))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        scaling = None
        if rope_type == "llama3":
            scaling = RopeScaling(
                factor=float(rope["factor"]),
                low_freq_factor=float(rope["low_freq_factor"]),
                high_freq_factor=float(rope["high_freq_factor"]),
                original_max_position_embeddings=int(rope["original_max_position_embeddings"]),
            )
        elif rope_type not in ("default", None):
            raise ConfigError(
                f"{source}: rope type {rope_type!r} is not supported (default, llama3)"
            )
        qkv_bias = model_type == "qwen2" or bool(hf.get("attention_bias", False))
        if hf.get("mlp_bias"):
            raise ConfigError(f"{source}: mlp_bias=true is not supported")
        kwargs.update(
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            rope_theta=float(theta),
            rope_scaling=scaling,
            qkv_bias=qkv_bias,
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=int(hf.get("max_position_embeddings", 4096)),
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @classmethod
    def from_hf_dir(cls, path: str | Path, **overrides) -> DecoderConfig:
        file = Path(path) / "config.json"
        if not file.is_file():
            raise WeightsNotFoundError(f"no config.json in checkpoint directory {path}")
        try:
            hf = json.loads(file.read_text())
        except json.JSONDecodeError as e:
            raise ConfigError(f"{file}: not valid JSON ({e})") from None
        return cls.from_hf_dict(hf, source=str(file), **overrides)

    def to_hf_dict(self) -> dict[str, Any]:
        """The `config.json` a `transformers` model of this shape expects."""
        arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[self.model_type]
        out: dict[str, Any] = {
            "architectures": [arch],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.embed_dim,
            "intermediate_size": self.mlp_dim,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "hidden_act": "silu",
            "torch_dtype": self.param_dtype,
        }
        if self.model_type == "llama":
            out["attention_bias"] = self.qkv_bias
            out["mlp_bias"] = False
        if self.rope_scaling is not None:
            out["rope_scaling"] = {"rope_type": "llama3", **dataclasses.asdict(self.rope_scaling)}
        return out
