"""The config sections a recipe needs to run at scale, shared by every paper config.

    add_scale_sections(config, preset="qwen2.5-7b-instruct", accelerator="H100-80GB",
                       num_devices=4, mesh={"data": 1, "fsdp": 2, "tensor": 2},
                       micro_batch_per_device=2, decode_batch=128)

adds:
  model.preset, model.param_dtype (f32: the master weights), model.compute_dtype (bf16),
  model.remat          the shape (so memory planning needs no weights) and the numerics
  hardware             {accelerator, num_devices}: what the recipe is sized for
  mesh                 {data, fsdp, tensor}; one axis may be -1 ("the rest of the devices")
  rules.train, rules.sampling
                       logical axis -> mesh axes, one table per role (memjax.parallel)
  distributed          {coordinator, num_processes, process_id, initialization_timeout}; empty
                       means "detect from the launcher's environment" (memjax.distributed)
  train.micro_batch_per_device, train.vocab_chunk
                       rows per device per micro-batch of the train step; log-prob vocab chunk
  rollout.decode_batch rows the sampler decodes at once over the whole mesh (rollouts of a
                       step run in waves of this size); it sizes the KV cache

Weights are f32 in the train state because both papers train with a learning rate of 1e-6: a
bf16 weight near 0.02 has a spacing of about 1e-4, so updates of that size round away.
"""

from __future__ import annotations

from collections.abc import Mapping

from ml_collections import ConfigDict

from memjax.models import presets
from memjax.parallel import SAMPLING_RULES, TRAIN_RULES


def rules_section(rules: Mapping[str, tuple[str, ...]]) -> ConfigDict:
    return ConfigDict({name: tuple(axes) for name, axes in rules.items()})


def add_scale_sections(
    config: ConfigDict,
    *,
    preset: str,
    accelerator: str,
    num_devices: int,
    mesh: Mapping[str, int],
    micro_batch_per_device: int,
    decode_batch: int,
    remat: str = "full",
    train_rules: Mapping[str, tuple[str, ...]] = TRAIN_RULES,
    sampling_rules: Mapping[str, tuple[str, ...]] = SAMPLING_RULES,
    vocab_chunk: int = 4096,
) -> ConfigDict:
    if "model" not in config:
        config.model = ConfigDict()
    config.model.preset = presets.canonical_name(preset)
    config.model.param_dtype = "float32"
    config.model.compute_dtype = "bfloat16"
    config.model.remat = remat
    config.hardware = ConfigDict({"accelerator": accelerator, "num_devices": int(num_devices)})
    config.mesh = ConfigDict({axis: int(mesh.get(axis, 1)) for axis in ("data", "fsdp", "tensor")})
    config.rules = ConfigDict(
        {"train": rules_section(train_rules), "sampling": rules_section(sampling_rules)}
    )
    config.distributed = ConfigDict(
        {"coordinator": "", "num_processes": 0, "process_id": -1, "initialization_timeout": 300}
    )
    if "train" not in config:
        config.train = ConfigDict()
    config.train.micro_batch_per_device = int(micro_batch_per_device)
    config.train.vocab_chunk = int(vocab_chunk)
    if "rollout" not in config:
        config.rollout = ConfigDict()
    config.rollout.decode_batch = int(decode_batch)
    return config


__all__ = ["add_scale_sections", "rules_section"]
