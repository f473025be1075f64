"""The config sections a recipe needs to run at scale, shared by every paper config.

    add_scale_sections(config, preset="qwen2.5-7b-instruct", accelerator="H100-80GB",
                       num_devices=4)

adds:
  model.preset, model.param_dtype (f32: the master weights), model.compute_dtype (bf16),
  model.remat          the shape (so memory planning needs no weights) and the numerics
  hardware             {accelerator, num_devices}: what the recipe is sized for, and
                       paper_num_devices: how many of them the paper trained on, where the
                       recipe needs more (tools/plan_memory.py --all reports both)
  rules.train, rules.sampling
                       logical axis -> mesh axes, one table per role (memjax.parallel)
  distributed          {coordinator, num_processes, process_id, initialization_timeout}; empty
                       means "detect from the launcher's environment" (memjax.distributed)

The mesh and the micro-batch live where each job reads them (Memory-R1: `rl.mesh`,
`rl.micro_batches`; MemSearcher: `mesh`, `train.micro_batch_per_device`).

Weights are f32 in the train state because both papers train with a learning rate of 1e-6: a
bf16 weight near 0.02 has a spacing of about 1e-4, so updates of that size round away.
"""

from __future__ import annotations

from collections.abc import Mapping

from ml_collections import ConfigDict

from memjax.models import presets
from memjax.parallel import SAMPLING_RULES, TRAIN_RULES
from memjax.planning import micro_batches_for


def rules_section(rules: Mapping[str, tuple[str, ...]]) -> ConfigDict:
    return ConfigDict({name: tuple(axes) for name, axes in rules.items()})


def add_scale_sections(
    config: ConfigDict,
    *,
    preset: str,
    accelerator: str,
    num_devices: int,
    remat: str = "full",
    paper_num_devices: int = 0,
    train_rules: Mapping[str, tuple[str, ...]] = TRAIN_RULES,
    sampling_rules: Mapping[str, tuple[str, ...]] = SAMPLING_RULES,
) -> ConfigDict:
    if "model" not in config:
        config.model = ConfigDict()
    config.model.preset = presets.canonical_name(preset)
    config.model.param_dtype = "float32"
    config.model.compute_dtype = "bfloat16"
    config.model.remat = remat
    config.hardware = ConfigDict(
        {
            "accelerator": accelerator,
            "num_devices": int(num_devices),
            "paper_num_devices": int(paper_num_devices or num_devices),
        }
    )
    config.rules = ConfigDict(
        {"train": rules_section(train_rules), "sampling": rules_section(sampling_rules)}
    )
    config.distributed = ConfigDict(
        {"coordinator": "", "num_processes": 0, "process_id": -1, "initialization_timeout": 300}
    )
    return config


__all__ = ["add_scale_sections", "micro_batches_for", "rules_section"]
