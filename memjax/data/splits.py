"""Splits that never overlap: Memory-R1's split of LoCoMo by conversation and a shared QA file
cut into train and evaluation questions; plus the summary every report carries
(`SplitSummary`). (Synthetic conversations split by seed: `memjax.experiments.synthetic_split`.)

Memory-R1 (§4.1) splits LoCoMo 1:1:8 by conversation with the adversarial category excluded:
train = conv-26 (152 questions), validation = conv-30 (81), test = the other 8 (1,307).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from memjax.data.categories import ADVERSARIAL, category_name
from memjax.data.locomo_types import Conversation

MEMORY_R1_TRAIN_IDS: tuple[str, ...] = ("conv-26",)
MEMORY_R1_VALIDATION_IDS: tuple[str, ...] = ("conv-30",)


@dataclasses.dataclass(frozen=True)
class LocomoExample:
    """One training/eval question, flat so it can travel through TFDS and grain."""

    conversation_id: str
    qa_index: int  # position in the conversation's qa list; (conversation_id, qa_index) is unique
    question: str
    answer: str | None  # None only for category 5 items without an answer
    category: int
    evidence: tuple[str, ...]
    adversarial_answer: str | None = None

    @property
    def category_name(self) -> str:
        return category_name(self.category)

    @property
    def uid(self) -> str:
        return f"{self.conversation_id}/{self.qa_index}"


@dataclasses.dataclass(frozen=True)
class Split:
    train: tuple[LocomoExample, ...]
    validation: tuple[LocomoExample, ...]
    test: tuple[LocomoExample, ...]

    def as_dict(self) -> dict[str, tuple[LocomoExample, ...]]:
        return {"train": self.train, "validation": self.validation, "test": self.test}


def qa_examples(
    conversation: Conversation, include_adversarial: bool = False
) -> list[LocomoExample]:
    return [
        LocomoExample(
            conversation_id=conversation.sample_id,
            qa_index=q.index,
            question=q.question,
            answer=q.answer,
            category=q.category,
            evidence=q.evidence,
            adversarial_answer=q.adversarial_answer,
        )
        for q in conversation.qa
        if include_adversarial or q.category != ADVERSARIAL
    ]


def split_by_conversation(
    conversations: Sequence[Conversation],
    train_ids: Sequence[str],
    validation_ids: Sequence[str],
    include_adversarial: bool = False,
) -> Split:
    """Train/validation by the given ids; every other conversation is test."""
    known = {c.sample_id for c in conversations}
    for name, ids in (("train_ids", train_ids), ("validation_ids", validation_ids)):
        missing = [i for i in ids if i not in known]
        if missing:
            raise ValueError(f"{name}: conversations {missing} not in the data ({sorted(known)})")
    overlap = set(train_ids) & set(validation_ids)
    if overlap:
        raise ValueError(f"train_ids and validation_ids share {sorted(overlap)}")
    parts: dict[str, list[LocomoExample]] = {"train": [], "validation": [], "test": []}
    for c in conversations:
        part = (
            "train"
            if c.sample_id in train_ids
            else "validation"
            if c.sample_id in validation_ids
            else "test"
        )
        parts[part].extend(qa_examples(c, include_adversarial))
    return Split(**{k: tuple(v) for k, v in parts.items()})


def memory_r1_split(
    conversations: Sequence[Conversation], include_adversarial: bool = False
) -> Split:
    """LoCoMo's Memory-R1 split: conv-26 train, conv-30 validation, the rest test."""
    return split_by_conversation(
        conversations, MEMORY_R1_TRAIN_IDS, MEMORY_R1_VALIDATION_IDS, include_adversarial
    )


# ------------------------------------------------------------------ a shared QA file


def held_out_ids(ids: Sequence[str], eval_fraction: float, seed: int) -> set[str]:
    """The ids that go to evaluation when one file serves both training and evaluation: the
    round(eval_fraction x N) ids first in the order of sha256(f"{seed}:{id}"), so the cut
    depends only on the ids and the seed (not on file order or on how many are loaded)."""
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction={eval_fraction} must be strictly between 0 and 1")
    unique = sorted(set(ids))
    if len(unique) != len(ids):
        raise ValueError(f"{len(ids) - len(unique)} duplicate question ids: cannot split by id")
    n_eval = round(eval_fraction * len(unique))
    if not 0 < n_eval < len(unique):
        raise ValueError(
            f"eval_fraction={eval_fraction} of {len(unique)} questions leaves {n_eval} for "
            "evaluation: both parts need at least one"
        )
    order = sorted(unique, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
    return set(order[:n_eval])


# ------------------------------------------------------------------ what a report states


@dataclasses.dataclass(frozen=True)
class SplitSummary:
    """The split a report scores, with the size of every part (so a reader can check that
    nothing it was trained on is in it)."""

    name: str  # the part the report scores ("test", "eval", ...)
    sizes: dict[str, int]  # part -> questions, for every part of the split
    how: str  # how the parts were made

    def line(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self.sizes.items())
        return f"Split: {self.name} ({self.how}). Questions per part: {parts}."

    def to_json(self) -> dict:
        return dataclasses.asdict(self)
