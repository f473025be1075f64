"""Checkpoints: HF safetensors <-> params, GGUF -> params, tokenizers, packaged weights."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memjax.checkpoints import packaged
from memjax.models.config import DecoderConfig
from memjax.parallel import TRAIN_RULES


@dataclasses.dataclass
class LoadedModel:
    params: dict
    cfg: DecoderConfig
    tokenizer: object | None  # memjax.checkpoints.tokenizer.Tokenizer
    path: Path


def trained_policy_dir(path: Path) -> Path:
    """A training workdir (SFT or RL) as a model source: the HF directory it exported to
    `policy/`; any other path unchanged."""
    exported = path / "policy"
    if (
        path.is_dir()
        and not (path / "config.json").exists()
        and (exported / "config.json").is_file()
    ):
        return exported
    return path


def load_model(
    source: str,
    *,
    mesh=None,
    rules=TRAIN_RULES,
    with_tokenizer: bool = True,
    **overrides,
) -> LoadedModel:
    """A decoder from 'packaged:smollm2', an HF checkpoint directory, a .gguf file, or a
    training workdir (its exported `policy/`).

    `overrides` replace DecoderConfig fields (param_dtype, compute_dtype, remat, ...).
    """
    from memjax.checkpoints.decoder_io import load_hf_decoder
    from memjax.checkpoints.gguf_io import load_gguf_decoder
    from memjax.checkpoints.tokenizer import load_tokenizer

    path = trained_policy_dir(packaged.resolve(source))
    if path.suffix == ".gguf":
        params, cfg = load_gguf_decoder(path, mesh=mesh, rules=rules, **overrides)
    else:
        params, cfg = load_hf_decoder(path, mesh=mesh, rules=rules, **overrides)
    tokenizer = None
    if with_tokenizer:
        tokenizer = load_tokenizer(path)
    return LoadedModel(params=params, cfg=cfg, tokenizer=tokenizer, path=path)
