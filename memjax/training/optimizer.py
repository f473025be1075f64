"""The optimizer chain: clip by global norm -> AdamW, with warmup then constant or cosine."""

from __future__ import annotations

import dataclasses

import optax

SCHEDULES = ("constant", "cosine")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    learning_rate: float = 1e-6
    warmup_steps: int = 0
    schedule: str = "constant"  # "constant" | "cosine" (decays to end_lr at total_steps)
    total_steps: int = 1000
    end_learning_rate: float = 0.0
    weight_decay: float = 0.01
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    max_grad_norm: float | None = 1.0

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate}: must be > 0")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps}: must be >= 0")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay}: must be >= 0")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ValueError(f"max_grad_norm={self.max_grad_norm}: must be > 0 (or None)")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r}; choose from {SCHEDULES}")
        if self.schedule == "cosine" and self.total_steps <= self.warmup_steps:
            raise ValueError(
                f"total_steps={self.total_steps} must exceed warmup_steps={self.warmup_steps}"
            )


def learning_rate_schedule(cfg: OptimizerConfig) -> optax.Schedule:
    if cfg.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, cfg.learning_rate, cfg.warmup_steps, cfg.total_steps, cfg.end_learning_rate
        )
    if cfg.warmup_steps == 0:
        return optax.constant_schedule(cfg.learning_rate)
    return optax.join_schedules(
        [
            optax.linear_schedule(0.0, cfg.learning_rate, cfg.warmup_steps),
            optax.constant_schedule(cfg.learning_rate),
        ],
        [cfg.warmup_steps],
    )


def make_optimizer(cfg: OptimizerConfig) -> optax.GradientTransformation:
    parts = []
    if cfg.max_grad_norm is not None:
        parts.append(optax.clip_by_global_norm(cfg.max_grad_norm))
    parts.append(
        optax.adamw(
            learning_rate_schedule(cfg),
            b1=cfg.b1,
            b2=cfg.b2,
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
        )
    )
    return optax.chain(*parts)


__all__ = ["OptimizerConfig", "learning_rate_schedule", "make_optimizer"]
