"""The laboratory's conversation sources for the Memory-R1 jobs: `config.data.path="synthetic"`.

    register()    # memjax.jobs calls this before a job runs

Synthetic conversations (`synthetic_split`) know their ground truth, so they also give the
oracles that build a perfect bank (`construction.builder=oracle`, `teacher.source=oracle`):
each turn's true facts and the operations they call for (`teachers.memory_oracles`).
"""

from __future__ import annotations

from ml_collections import ConfigDict

from memjax.agents.memory_r1.sources import ConversationSource, register_source
from memjax.data.locomo_types import Conversation
from memjax.experiments.synthetic_split import (
    SYNTHETIC_HELDOUT_PREFIX,
    SYNTHETIC_TRAIN_PREFIX,
    SyntheticSplitConfig,
    synthetic_split,
    synthetic_split_events,
)

SYNTHETIC = "synthetic"


def synthetic_config(data: ConfigDict) -> SyntheticSplitConfig:
    """The source's settings: config.data.synthetic, read once at the job's start."""
    s = data.synthetic
    return SyntheticSplitConfig(
        num_train=int(s.num_train),
        num_validation=int(s.num_validation),
        num_test=int(s.num_test),
        sessions_per_conversation=int(s.sessions_per_conversation),
        train_seed=int(s.train_seed),
        held_out_seed=int(s.held_out_seed),
    )


def synthetic_conversations(settings: SyntheticSplitConfig) -> list[Conversation]:
    parts = synthetic_split(settings)
    return [c for part in ("train", "validation", "test") for c in parts[part]]


def synthetic_split_ids(ids: list[str], split: str, settings: SyntheticSplitConfig) -> list[str]:
    """The train seed's conversations train, the held-out seed's validate (the first
    `num_validation`) and test (the rest)."""
    held_out = [i for i in ids if i.startswith(SYNTHETIC_HELDOUT_PREFIX + "-")]
    n_val = settings.num_validation
    parts = {
        "train": [i for i in ids if i.startswith(SYNTHETIC_TRAIN_PREFIX + "-")],
        "validation": held_out[:n_val],
        "test": held_out[n_val:],
    }
    return parts[split]


def synthetic_how(s: SyntheticSplitConfig) -> str:
    return (
        f"synthetic: train seed {s.train_seed}, held-out seed {s.held_out_seed} "
        "(validation first, then test)"
    )


def oracles(events, streams, context_turns: int) -> tuple:
    """(fact extractor, manager) answering from one conversation's track events, for the fact
    prompts of every stream given (the whole conversation, and windows of it)."""
    from memjax.experiments.teachers.memory_oracles import FactOracle, ManagerOracle

    return FactOracle(streams, [events] * len(streams), context_turns), ManagerOracle(events)


SOURCE = ConversationSource(
    settings=synthetic_config,
    conversations=synthetic_conversations,
    split_ids=synthetic_split_ids,
    how=synthetic_how,
    truth=synthetic_split_events,
    oracles=oracles,
)


def register() -> None:
    register_source(SYNTHETIC, SOURCE)


__all__ = ["SYNTHETIC", "SOURCE", "register", "synthetic_config"]
