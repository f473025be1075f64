"""LoRA adapters out of memjax: merged HF checkpoints, and PEFT's adapter layout (both ways).

    export_merged_hf(base, adapters, cfg, "/out/merged")   # config.json + model.safetensors
    export_peft_adapters(adapters, cfg, "/out/adapter", base_model="/models/Qwen2.5-7B")
    adapters = load_peft_adapters("/out/adapter", cfg)

The merged directory is a plain LlamaForCausalLM / Qwen2ForCausalLM checkpoint (W + s A B per
target, computed in f32). The PEFT directory holds `adapter_config.json` and
`adapter_model.safetensors` as `peft.PeftModel.from_pretrained(base, dir)` reads them: per layer
and target, lora_A.weight [r, in] and lora_B.weight [out, r] (torch Linear layout), with
lora_alpha / r as the scale (no rsLoRA) and the same flattening of heads as HF's q/k/v/o weights.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jax
import numpy as np

from memjax.checkpoints.decoder_io import CheckpointError, export_hf_decoder
from memjax.checkpoints.safetensors_io import SafetensorsFile, write_safetensors
from memjax.models.config import DecoderConfig
from memjax.models.lora import jit_merge_adapters, lora_abstract
from memjax.models.lora_config import LoraConfig

PEFT_MODULES = {
    "q": "self_attn.q_proj",
    "k": "self_attn.k_proj",
    "v": "self_attn.v_proj",
    "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
}
_PEFT_PREFIX = "base_model.model.model.layers.{i}."
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def export_merged_hf(base, adapters, cfg: DecoderConfig, directory, dtype=None) -> Path:
    """The base with the adapters merged in, as an HF checkpoint directory (atomic)."""
    merged = jit_merge_adapters(base, adapters, cfg)
    return export_hf_decoder(merged, cfg.replace(lora=None), directory, dtype=dtype)


def _peft_name(target: str, i: int, which: str) -> str:
    return _PEFT_PREFIX.format(i=i) + f"{PEFT_MODULES[target]}.lora_{which}.weight"


def peft_adapter_config(lora: LoraConfig, base_model: str) -> dict:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "target_modules": [PEFT_MODULES[t].split(".")[-1] for t in lora.targets],
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "init_lora_weights": True,
        "inference_mode": True,
        "modules_to_save": None,
    }


def export_peft_adapters(
    adapters, cfg: DecoderConfig, directory, *, base_model: str = "", dtype=np.float32
) -> Path:
    """Writes the adapters in PEFT's layout (atomic: assembled beside, renamed into place)."""
    lora = cfg.lora
    if lora is None:
        raise ValueError("export_peft_adapters: DecoderConfig.lora is None")
    tensors = {}
    for target, pair in adapters["layers"].items():
        a = np.asarray(jax.device_get(pair["a"]), dtype)  # [L, *in, r]
        b = np.asarray(jax.device_get(pair["b"]), dtype)  # [L, r, *out]
        for i in range(cfg.num_layers):
            tensors[_peft_name(target, i, "A")] = a[i].reshape(-1, lora.rank).T  # [r, in]
            tensors[_peft_name(target, i, "B")] = b[i].reshape(lora.rank, -1).T  # [out, r]
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_safetensors(tmp / WEIGHTS_FILE, tensors)
    (tmp / CONFIG_FILE).write_text(json.dumps(peft_adapter_config(lora, base_model), indent=2))
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(tmp, directory)
    return directory


def lora_config_from_peft(directory) -> LoraConfig:
    """The LoraConfig a PEFT adapter directory describes (one clear error for what memjax's
    adapters cannot express: other PEFT types, rsLoRA, biases, per-module ranks, other modules)."""
    file = Path(directory) / CONFIG_FILE
    if not file.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILE} in adapter directory {directory}")
    try:
        c = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{file}: not valid JSON ({e})") from None
    if c.get("peft_type") != "LORA":
        raise CheckpointError(f"{file}: peft_type {c.get('peft_type')!r} is not LORA")
    for field, ok in (("use_rslora", False), ("bias", "none"), ("fan_in_fan_out", False)):
        if c.get(field, ok) != ok:
            raise CheckpointError(f"{file}: {field}={c[field]!r} is not supported ({ok!r} only)")
    if c.get("rank_pattern") or c.get("alpha_pattern"):
        raise CheckpointError(f"{file}: per-module rank_pattern/alpha_pattern is not supported")
    by_module = {v.split(".")[-1]: k for k, v in PEFT_MODULES.items()}
    modules = c.get("target_modules") or []
    modules = [modules] if isinstance(modules, str) else modules
    unknown = [m for m in modules if m not in by_module]
    if unknown:
        raise CheckpointError(f"{file}: target_modules {unknown} are not among {sorted(by_module)}")
    targets = tuple(t for t in PEFT_MODULES if PEFT_MODULES[t].split(".")[-1] in modules)
    return LoraConfig(rank=int(c["r"]), alpha=float(c["lora_alpha"]), targets=targets)


def load_peft_adapters(directory, cfg: DecoderConfig):
    """Adapters from a PEFT directory, shaped for `cfg` (whose `lora` must match the file's)."""
    directory = Path(directory)
    file_lora = lora_config_from_peft(directory)
    if cfg.lora is None or (cfg.lora.rank, cfg.lora.alpha, set(cfg.lora.targets)) != (
        file_lora.rank,
        file_lora.alpha,
        set(file_lora.targets),
    ):
        raise CheckpointError(
            f"{directory}: adapters are rank {file_lora.rank}, alpha {file_lora.alpha}, targets "
            f"{file_lora.targets}; the model's lora config is {cfg.lora}"
        )
    source = SafetensorsFile(directory / WEIGHTS_FILE)
    names = set(source.keys())

    def read(info, target, which):
        out = np.empty(info.shape, info.dtype)
        for i in range(cfg.num_layers):
            name = _peft_name(target, i, which)
            if name not in names:
                raise CheckpointError(f"{source.path}: tensor {name!r} is missing")
            w = np.asarray(source.get(name), np.float32).T  # [in, r] or [r, out]
            if w.size != np.prod(info.shape[1:]):
                raise CheckpointError(
                    f"{source.path}: tensor {name!r} has shape {w.T.shape}, which does not "
                    f"fit {info.shape[1:]}"
                )
            out[i] = w.reshape(info.shape[1:])
        return jax.numpy.asarray(out)

    abstract = lora_abstract(cfg)
    return {
        "layers": {
            t: {
                "a": read(pair["a"], t, "A"),
                "b": read(pair["b"], t, "B"),
            }
            for t, pair in abstract["layers"].items()
        }
    }


__all__ = [
    "PEFT_MODULES",
    "export_merged_hf",
    "export_peft_adapters",
    "peft_adapter_config",
    "lora_config_from_peft",
    "load_peft_adapters",
]
