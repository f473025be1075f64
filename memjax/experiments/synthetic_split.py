"""Synthetic conversations split by seed: train from one seed, validation then test from another,
so no held-out conversation repeats a training one."""

from __future__ import annotations

import dataclasses

from memjax.data.locomo_types import Conversation
from memjax.experiments.synthetic import (
    SyntheticConfig,
    generate_conversations,
    generate_track_events,
)

SYNTHETIC_TRAIN_PREFIX = "syn-train"
SYNTHETIC_HELDOUT_PREFIX = "syn-heldout"


@dataclasses.dataclass(frozen=True)
class SyntheticSplitConfig:
    """Train conversations from `train_seed`; validation then test from `held_out_seed`."""

    num_train: int = 4
    num_validation: int = 1
    num_test: int = 3
    sessions_per_conversation: int = 4
    train_seed: int = 0
    held_out_seed: int = 1

    def __post_init__(self):
        if self.train_seed == self.held_out_seed:
            raise ValueError(
                f"train_seed and held_out_seed are both {self.train_seed}: the held-out "
                "conversations would repeat the training ones"
            )
        for name in ("num_train", "num_validation", "num_test"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")


def synthetic_split(cfg: SyntheticSplitConfig) -> dict[str, list[Conversation]]:
    """{"train", "validation", "test"} -> conversations; ids say which seed made them."""

    def make(n: int, seed: int, prefix: str) -> list[Conversation]:
        if n == 0:
            return []
        return generate_conversations(
            SyntheticConfig(
                num_conversations=n,
                sessions_per_conversation=cfg.sessions_per_conversation,
                seed=seed,
                id_prefix=prefix,
            )
        )

    held_out = make(cfg.num_validation + cfg.num_test, cfg.held_out_seed, SYNTHETIC_HELDOUT_PREFIX)
    return {
        "train": make(cfg.num_train, cfg.train_seed, SYNTHETIC_TRAIN_PREFIX),
        "validation": held_out[: cfg.num_validation],
        "test": held_out[cfg.num_validation :],
    }


def synthetic_split_events(cfg: SyntheticSplitConfig) -> dict[str, list]:
    """conversation id -> its fact-track events, for every conversation `synthetic_split`
    makes from the same cfg (the ground truth an oracle teacher reads)."""
    out: dict[str, list] = {}
    for n, seed, prefix in (
        (cfg.num_train, cfg.train_seed, SYNTHETIC_TRAIN_PREFIX),
        (cfg.num_validation + cfg.num_test, cfg.held_out_seed, SYNTHETIC_HELDOUT_PREFIX),
    ):
        if n:
            sessions = cfg.sessions_per_conversation
            out.update(
                generate_track_events(
                    SyntheticConfig(
                        num_conversations=n,
                        sessions_per_conversation=sessions,
                        seed=seed,
                        id_prefix=prefix,
                    )
                )
            )
    return out


__all__ = [
    "SYNTHETIC_TRAIN_PREFIX",
    "SYNTHETIC_HELDOUT_PREFIX",
    "SyntheticSplitConfig",
    "synthetic_split",
    "synthetic_split_events",
]
