"""EncoderConfig (the BERT architecture) and EmbeddingRecipe (how hidden states become vectors).

The architecture comes from an HF `config.json`; the recipe (pooling, normalisation, prefixes,
max length) from the checkpoint's sentence-transformers files when present, else from a named
layout:

    minilm  mean pooling, L2-normalised, no prefixes             (all-MiniLM-L6-v2)
    e5      mean pooling, L2-normalised, "query: " / "passage: "  (intfloat/e5-*-v2)
    bge     CLS pooling,  L2-normalised, BGE's English query instruction, no passage prefix

Both are frozen and hashable, so they can be static arguments of `jax.jit`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from memjax.model_errors import WeightsNotFoundError
from memjax.models.config import ConfigError

SUPPORTED_MODEL_TYPES = ("bert",)
_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh")
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
POOLINGS = ("mean", "cls")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    vocab_size: int
    embed_dim: int  # hidden_size
    mlp_dim: int  # intermediate_size
    num_layers: int
    num_heads: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"  # "gelu" is the exact erf form; the others use the tanh form
    param_dtype: str = "float32"
    compute_dtype: str = "float32"

    def __post_init__(self):
        if self.embed_dim % self.num_heads:
            raise ConfigError(
                f"hidden_size={self.embed_dim} is not a multiple of "
                f"num_attention_heads={self.num_heads}"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ConfigError(f"hidden_act={self.hidden_act!r}; choose from {_ACTIVATIONS}")
        for field in ("param_dtype", "compute_dtype"):
            if getattr(self, field) not in _DTYPES:
                raise ConfigError(f"{field}={getattr(self, field)!r}; choose from {list(_DTYPES)}")

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @property
    def dtype(self):
        return _DTYPES[self.compute_dtype]

    @property
    def weight_dtype(self):
        return _DTYPES[self.param_dtype]

    def replace(self, **changes) -> EncoderConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], source: str = "config.json", **overrides):
        model_type = hf.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ConfigError(
                f"{source}: model_type {model_type!r} is not supported; memjax's encoder covers "
                f"{SUPPORTED_MODEL_TYPES} (MiniLM, E5, BGE)"
            )
        if hf.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(
                f"{source}: position_embedding_type={hf['position_embedding_type']!r} is not "
                "supported (absolute only)"
            )
        try:
            kwargs = dict(
                vocab_size=int(hf["vocab_size"]),
                embed_dim=int(hf["hidden_size"]),
                mlp_dim=int(hf["intermediate_size"]),
                num_layers=int(hf["num_hidden_layers"]),
                num_heads=int(hf["num_attention_heads"]),
                max_position_embeddings=int(hf.get("max_position_embeddings", 512)),
                type_vocab_size=int(hf.get("type_vocab_size", 2)),
                layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
                hidden_act=str(hf.get("hidden_act", "gelu")),
            )
        except KeyError as e:
            raise ConfigError(f"{source}: missing field {e.args[0]!r}") from None
        kwargs.update(overrides)
        try:
            return cls(**kwargs)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_hf_dir(cls, path: str | Path, **overrides) -> EncoderConfig:
        file = Path(path) / "config.json"
        return cls.from_hf_dict(_read_json(file), str(file), **overrides)


@dataclasses.dataclass(frozen=True)
class EmbeddingRecipe:
    """How token states become one vector per text."""

    pooling: str = "mean"  # "mean" over real tokens, or "cls" (the first token's state)
    normalize: bool = True
    query_prefix: str = ""
    passage_prefix: str = ""
    max_length: int = 512  # tokens, [CLS] and [SEP] included; longer texts are truncated

    def __post_init__(self):
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling={self.pooling!r}; choose from {POOLINGS}")
        if self.max_length < 2:
            raise ConfigError(f"max_length={self.max_length} leaves no room for [CLS] and [SEP]")

    def prefix(self, kind: str) -> str:
        if kind == "query":
            return self.query_prefix
        if kind == "passage":
            return self.passage_prefix
        raise ValueError(f"text kind {kind!r}; choose 'query' or 'passage'")


LAYOUTS: dict[str, EmbeddingRecipe] = {
    "minilm": EmbeddingRecipe(pooling="mean", max_length=256),
    "e5": EmbeddingRecipe(pooling="mean", query_prefix="query: ", passage_prefix="passage: "),
    "bge": EmbeddingRecipe(
        pooling="cls",
        query_prefix="Represent this sentence for searching relevant passages: ",
    ),
}


def recipe_from_dir(path: str | Path, layout: str | None = None, **overrides) -> EmbeddingRecipe:
    """The recipe for a checkpoint directory.

    A named `layout` wins; otherwise the sentence-transformers files decide (1_Pooling/config.json
    for the pooling, sentence_bert_config.json for max_seq_length, a 2_Normalize module for
    normalisation); with neither, mean pooling with normalisation."""
    path = Path(path)
    if layout is not None:
        if layout not in LAYOUTS:
            raise ConfigError(
                f"embedding layout {layout!r} is unknown; choose from {list(LAYOUTS)}"
            )
        return dataclasses.replace(LAYOUTS[layout], **overrides)
    kwargs: dict[str, Any] = {}
    pooling_file = path / "1_Pooling" / "config.json"
    if pooling_file.is_file():
        pool = _read_json(pooling_file)
        if pool.get("pooling_mode_cls_token"):
            kwargs["pooling"] = "cls"
        elif pool.get("pooling_mode_mean_tokens"):
            kwargs["pooling"] = "mean"
        else:
            raise ConfigError(f"{pooling_file}: only CLS or mean pooling is supported")
    st_file = path / "sentence_bert_config.json"
    if st_file.is_file():
        kwargs["max_length"] = int(_read_json(st_file).get("max_seq_length", 512))
    modules_file = path / "modules.json"
    if modules_file.is_file():
        modules = _read_json(modules_file)
        kwargs["normalize"] = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
    kwargs.update(overrides)
    return EmbeddingRecipe(**kwargs)


def _read_json(file: Path) -> Any:
    if not file.is_file():
        raise WeightsNotFoundError(f"{file} does not exist")
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{file}: not valid JSON ({e})") from None
