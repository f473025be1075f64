"""Decoder checkpoints: HF safetensors directories and GGUF files -> params, and params -> HF.

Loading walks memjax's abstract parameter tree one leaf at a time: the leaf's host array is
filled from the checkpoint's tensors (layer by layer for stacked leaves), converted to the
parameter dtype, and placed on the mesh with its sharding before the next leaf is read. The
host never holds more than one leaf beyond the memory-mapped files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Protocol

import jax
import numpy as np
from jax.sharding import Mesh

from memjax import workdir as workdir_lib
from memjax.checkpoints.decoder_names import TensorRule, decoder_rules
from memjax.checkpoints.safetensors_io import SafetensorsCheckpoint, write_safetensors
from memjax.model_errors import WeightsError, WeightsNotFoundError
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.params import flatten_with_names, is_info
from memjax.parallel import TRAIN_RULES, param_shardings

CheckpointError = WeightsError  # the name this module's callers import


class TensorSource(Protocol):
    """Anything that serves HF-named tensors: a safetensors directory, a GGUF file."""

    def __contains__(self, name: str) -> bool: ...
    def shape(self, name: str) -> tuple[int, ...]: ...
    def get(self, name: str) -> np.ndarray: ...


def _read(source: TensorSource, rule: TensorRule, cfg: DecoderConfig, i: int | None, where: str):
    name = rule.hf.format(i=i)
    if name not in source:
        raise CheckpointError(f"{where}: tensor {name!r} is missing (needed for {rule.param})")
    expected = rule.hf_shape(cfg)
    got = tuple(source.shape(name))
    if got != expected:
        raise CheckpointError(f"{where}: tensor {name!r} has shape {got}, expected {expected}")
    return rule.to_param(np.asarray(source.get(name)), cfg)


def load_decoder_params(
    source: TensorSource,
    cfg: DecoderConfig,
    where: str,
    mesh: Mesh | None = None,
    rules=TRAIN_RULES,
):
    """Fills the decoder's parameter tree from `source`; arrays land on `mesh` when given."""
    abstract = decoder_abstract(cfg)
    infos = flatten_with_names(abstract, is_leaf=is_info)
    shardings = flatten_with_names(param_shardings(abstract, mesh, rules)) if mesh else None
    by_param = {r.param: r for r in decoder_rules(cfg)}
    loaded = {}
    for path, info in infos.items():
        rule = by_param[path]
        if rule.stacked:
            host = np.empty(info.shape, info.dtype)
            for i in range(cfg.num_layers):
                host[i] = _read(source, rule, cfg, i, where)
        else:
            host = np.asarray(_read(source, rule, cfg, None, where), info.dtype)
        loaded[path] = (
            jax.device_put(host, shardings[path]) if shardings else jax.numpy.asarray(host)
        )
        del host
    return _unflatten(abstract, loaded)


def _unflatten(abstract, flat: dict):
    names = list(flatten_with_names(abstract, is_leaf=is_info))
    treedef = jax.tree.structure(abstract, is_leaf=is_info)
    return jax.tree.unflatten(treedef, [flat[n] for n in names])


def load_hf_decoder(
    directory: str | Path, mesh: Mesh | None = None, rules=TRAIN_RULES, **overrides
):
    """(params, cfg) from an HF checkpoint directory (config.json + safetensors)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise WeightsNotFoundError(f"checkpoint directory {directory} does not exist")
    cfg = DecoderConfig.from_hf_dir(directory, **overrides)
    # A tied checkpoint that also stores lm_head.weight is read without it: the embedding is
    # the one matrix memjax keeps.
    source = SafetensorsCheckpoint(directory)
    return load_decoder_params(source, cfg, str(directory), mesh, rules), cfg


def export_hf_decoder(
    params, cfg: DecoderConfig, directory: str | Path, dtype=None, tokenizer=None
) -> Path:
    """Writes `params` as an HF checkpoint directory (config.json + model.safetensors) that
    `transformers` (and vLLM) load as LlamaForCausalLM / Qwen2ForCausalLM; with `tokenizer`
    (memjax's Tokenizer) its files and chat template too, so the directory is a complete model
    source. Atomic: the directory is assembled beside its destination and renamed into place."""
    if workdir_lib.is_remote(directory):  # assembled locally, then uploaded file by file
        with workdir_lib.staged_dir(directory) as local:
            export_hf_decoder(params, cfg, local, dtype=dtype, tokenizer=tokenizer)
        return directory
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    flat = flatten_with_names(params)
    tensors = {}
    for rule in decoder_rules(cfg):
        value = np.asarray(jax.device_get(flat[rule.param]))
        if dtype is not None:
            value = value.astype(dtype)
        if rule.stacked:
            for i in range(cfg.num_layers):
                tensors[rule.hf.format(i=i)] = rule.to_hf(value[i], cfg)
        else:
            tensors[rule.hf] = rule.to_hf(value, cfg)
    write_safetensors(tmp / "model.safetensors", tensors)
    hf_cfg = cfg.to_hf_dict()
    if dtype is not None:
        hf_cfg["torch_dtype"] = np.dtype(dtype).name
    (tmp / "config.json").write_text(json.dumps(hf_cfg, indent=2))
    if tokenizer is not None:
        tokenizer.hf.save_pretrained(str(tmp))
    if directory.exists():
        old = directory.with_name(directory.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old)
    else:
        os.replace(tmp, directory)
    return directory
