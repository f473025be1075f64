"""The SFT job's typed config, read once from `config.sft` and validated with bounds.

    rc = SFTRunConfig.from_section(config.sft, "config.sft")

Loop fields (`memjax.training.schedule.LoopConfig`) sit at the section's top level beside the
fields below; `optimizer` is a strict sub-section (`memjax.training.optimizer.OptimizerConfig`).
"""

from __future__ import annotations

import dataclasses

from memjax.models.lora_config import LoraConfig, lora_from_section
from memjax.training.aggregation import AGG_MODES
from memjax.training.optimizer import OptimizerConfig
from memjax.training.schedule import LoopConfig
from memjax.training.sections import as_dict, pick, read_section, require
from memjax.training.states import optimizer_from

TOKEN_MEAN_OVER = ("data", "batch")


@dataclasses.dataclass(frozen=True)
class BatchingConfig:
    batch_rows: int = 8  # rows per optimizer update
    micro_batches: int = 1  # gradient-accumulation slices per update
    max_seq_len: int = 1024  # longer rows are cut at the end (counted)
    bucket: int = 64  # row lengths are rounded up to a multiple of this (one compile each)
    agg_mode: str = "token-mean"  # RL's aggregation modes
    # token-mean's denominator: "data" (rows x the training data's mean trained tokens per row:
    # every token weighs the same whichever length bucket it is batched in) or "batch" (the
    # batch's own trained tokens, which favours the tokens of short-row buckets).
    token_mean_over: str = "data"
    vocab_chunk: int = 4096
    eval_batch_rows: int = 8
    # > 0: rows whose first `shared_prefix` tokens are equal (and untrained) share batches, and
    # a batch's common prefix (rounded down to `bucket`) runs once, not once per row
    # (memjax.models.shared_prefix): e.g. 256 for the Memory-R1 manager's fixed instructions.
    shared_prefix: int = 0

    FIELDS = (
        "batch_rows",
        "micro_batches",
        "max_seq_len",
        "bucket",
        "agg_mode",
        "token_mean_over",
        "vocab_chunk",
        "eval_batch_rows",
        "shared_prefix",
    )

    def validate(self, path: str) -> BatchingConfig:
        for name in ("batch_rows", "micro_batches", "bucket", "vocab_chunk", "eval_batch_rows"):
            v = getattr(self, name)
            require(v >= 1, f"{path}.{name}", v, "must be >= 1")
        require(self.max_seq_len >= 2, f"{path}.max_seq_len", self.max_seq_len, "must be >= 2")
        require(
            self.shared_prefix >= 0, f"{path}.shared_prefix", self.shared_prefix, "must be >= 0"
        )
        require(
            self.batch_rows % self.micro_batches == 0,
            f"{path}.micro_batches",
            self.micro_batches,
            f"must divide batch_rows={self.batch_rows}",
        )
        require(
            self.agg_mode in AGG_MODES,
            f"{path}.agg_mode",
            self.agg_mode,
            f"choose from {AGG_MODES}",
        )
        require(
            self.token_mean_over in TOKEN_MEAN_OVER,
            f"{path}.token_mean_over",
            self.token_mean_over,
            f"choose from {TOKEN_MEAN_OVER}",
        )
        return self


@dataclasses.dataclass(frozen=True)
class SFTRunConfig:
    loop: LoopConfig
    batching: BatchingConfig
    optimizer: OptimizerConfig
    mesh: dict | None
    lora: LoraConfig | None = None  # `lora.rank` > 0: train adapters over a frozen base

    @classmethod
    def from_section(cls, section, path: str = "config.sft") -> SFTRunConfig:
        values = as_dict(section)
        loop = read_section(LoopConfig, pick(values, LoopConfig.FIELDS), path).validate(path)
        batching = read_section(BatchingConfig, pick(values, BatchingConfig.FIELDS), path)
        return cls(
            loop=loop,
            batching=batching.validate(path),
            optimizer=optimizer_from(values.get("optimizer"), f"{path}.optimizer", loop.num_steps),
            mesh=as_dict(values.get("mesh")) or None,
            lora=lora_from_section(values.get("lora"), path),
        )


__all__ = ["SFTRunConfig", "BatchingConfig"]
