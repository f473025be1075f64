"""Per-question examples and Memory-R1's split of LoCoMo by conversation.

Memory-R1 (§4.1) splits LoCoMo 1:1:8 by conversation with the adversarial category excluded:
train = conv-26 (152 questions), validation = conv-30 (81), test = the other 8 (1,307).
"""

from __future__ import annotations

import dataclasses
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
