"""BERT-family HF checkpoints (safetensors) -> encoder params.

One table maps each leaf of `encoder_abstract` to its HF tensor. HF stores a linear layer as
[out, in]; memjax stores einsum operands [in, ...] with heads split out. Checkpoints saved from
`BertModel` have bare names (`embeddings.word_embeddings.weight`); those saved from a task model
(`BertForMaskedLM`, ...) prefix them with `bert.`; both are read. The pooler and MLM heads are
ignored: sentence embeddings pool the last hidden states.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from memjax.checkpoints.safetensors_io import SafetensorsCheckpoint
from memjax.model_errors import WeightsError, WeightsNotFoundError
from memjax.models.encoder import encoder_abstract
from memjax.models.encoder_config import EncoderConfig
from memjax.models.params import flatten_with_names, is_info
from memjax.parallel import TRAIN_RULES, param_shardings


class EncoderCheckpointError(WeightsError):
    pass


Transform = Callable[[np.ndarray, EncoderConfig], np.ndarray]
_same: Transform = lambda w, c: w
_T: Transform = lambda w, c: w.T
_in_heads: Transform = lambda w, c: w.T.reshape(c.embed_dim, c.num_heads, c.head_dim)
_heads_bias: Transform = lambda w, c: w.reshape(c.num_heads, c.head_dim)
_out_heads: Transform = lambda w, c: w.T.reshape(c.num_heads, c.head_dim, c.embed_dim)

_L = "encoder.layer.{i}."
# memjax path -> (HF name, transform). Names under layers/ are read once per layer.
RULES: dict[str, tuple[str, Transform]] = {
    "embed/word": ("embeddings.word_embeddings.weight", _same),
    "embed/position": ("embeddings.position_embeddings.weight", _same),
    "embed/token_type": ("embeddings.token_type_embeddings.weight", _same),
    "embed/norm_scale": ("embeddings.LayerNorm.weight", _same),
    "embed/norm_bias": ("embeddings.LayerNorm.bias", _same),
    "layers/q": (_L + "attention.self.query.weight", _in_heads),
    "layers/k": (_L + "attention.self.key.weight", _in_heads),
    "layers/v": (_L + "attention.self.value.weight", _in_heads),
    "layers/q_bias": (_L + "attention.self.query.bias", _heads_bias),
    "layers/k_bias": (_L + "attention.self.key.bias", _heads_bias),
    "layers/v_bias": (_L + "attention.self.value.bias", _heads_bias),
    "layers/o": (_L + "attention.output.dense.weight", _out_heads),
    "layers/o_bias": (_L + "attention.output.dense.bias", _same),
    "layers/attn_norm_scale": (_L + "attention.output.LayerNorm.weight", _same),
    "layers/attn_norm_bias": (_L + "attention.output.LayerNorm.bias", _same),
    "layers/mlp_in": (_L + "intermediate.dense.weight", _T),
    "layers/mlp_in_bias": (_L + "intermediate.dense.bias", _same),
    "layers/mlp_out": (_L + "output.dense.weight", _T),
    "layers/mlp_out_bias": (_L + "output.dense.bias", _same),
    "layers/mlp_norm_scale": (_L + "output.LayerNorm.weight", _same),
    "layers/mlp_norm_bias": (_L + "output.LayerNorm.bias", _same),
}
# Old BERT checkpoints (TF conversions) name LayerNorm parameters gamma/beta.
_LEGACY = {".LayerNorm.weight": ".LayerNorm.gamma", ".LayerNorm.bias": ".LayerNorm.beta"}


def _prefix(source: SafetensorsCheckpoint) -> str:
    for prefix in ("", "bert.", "model."):
        if prefix + "embeddings.word_embeddings.weight" in source:
            return prefix
    raise EncoderCheckpointError(
        f"{source.directory}: no BERT embeddings tensor (embeddings.word_embeddings.weight, "
        "optionally prefixed with 'bert.') — is this a BERT-family checkpoint?"
    )


def _read(source, name: str, shape, transform, cfg, where: str) -> np.ndarray:
    if name not in source:
        for new, old in _LEGACY.items():
            if name.endswith(new) and name[: -len(new)] + old in source:
                name = name[: -len(new)] + old
                break
        else:
            raise EncoderCheckpointError(f"{where}: tensor {name!r} is missing")
    value = transform(np.asarray(source.get(name)), cfg)
    if tuple(value.shape) != tuple(shape):
        raise EncoderCheckpointError(
            f"{where}: tensor {name!r} has shape {source.shape(name)}, which does not fit "
            f"memjax's {tuple(shape)} for this config.json"
        )
    return value


def load_encoder_params(
    directory: str | Path,
    cfg: EncoderConfig,
    mesh: Mesh | None = None,
    rules=TRAIN_RULES,
):
    """Fills the encoder's parameter tree from the safetensors in `directory`, leaf by leaf."""
    source = SafetensorsCheckpoint(directory)
    prefix = _prefix(source)
    where = str(directory)
    abstract = encoder_abstract(cfg)
    infos = flatten_with_names(abstract, is_leaf=is_info)
    shardings = flatten_with_names(param_shardings(abstract, mesh, rules)) if mesh else None
    leaves = []
    for path, info in infos.items():
        hf, transform = RULES[path]
        if path.startswith("layers/"):
            host = np.empty(info.shape, info.dtype)
            for i in range(cfg.num_layers):
                host[i] = _read(
                    source, prefix + hf.format(i=i), info.shape[1:], transform, cfg, where
                )
        else:
            host = np.asarray(
                _read(source, prefix + hf, info.shape, transform, cfg, where), info.dtype
            )
        leaves.append(jax.device_put(host, shardings[path]) if shardings else jnp.asarray(host))
    return jax.tree.unflatten(jax.tree.structure(abstract, is_leaf=is_info), leaves)


def load_hf_encoder(directory: str | Path, mesh: Mesh | None = None, rules=TRAIN_RULES, **kw):
    """(params, cfg) from an HF BERT checkpoint directory (config.json + safetensors)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise WeightsNotFoundError(f"encoder checkpoint directory {directory} does not exist")
    cfg = EncoderConfig.from_hf_dir(directory, **kw)
    return load_encoder_params(directory, cfg, mesh, rules), cfg
