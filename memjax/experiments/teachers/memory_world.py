"""The data and memory banks Memory-R1's teachers and replays share, cached per conversation.

A data source is a small dict carried in every trajectory's `source`, so a replay finds the
same conversation again:
    {"data": "synthetic", "seed": 1000, "num_conversations": 8, "sessions_per_conversation": 4}
    {"data": "locomo", "path": ".../locomo10.json"}
Answer-agent banks: on synthetic data, the bank the scripted fact extractor and manager build
through memjax's construction path (`build_banks`); on LoCoMo, which carries no facts, every
turn stored as said (`raw_turn_bank`). Either way each memory's op log names its turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from memjax.agents.memory_r1.answer_env import AnswerExample, AnswerSettings, answer_examples
from memjax.agents.memory_r1.construction import (
    ConstructionSettings,
    build_banks,
    conversation_stream,
)
from memjax.agents.memory_r1.raw_turns import raw_turn_bank
from memjax.data.categories import ADVERSARIAL
from memjax.data.locomo import load_locomo
from memjax.data.locomo_types import Conversation
from memjax.experiments.synthetic import SyntheticConfig, TrackEvent, generate_conversations
from memjax.experiments.synthetic import generate_track_events as _track_events
from memjax.experiments.teachers.memory_oracles import FactOracle, ManagerOracle
from memjax.memory.bank import MemoryBank


def synthetic_source(seed: int, num_conversations: int, sessions: int) -> dict:
    return {
        "data": "synthetic",
        "seed": int(seed),
        "num_conversations": int(num_conversations),
        "sessions_per_conversation": int(sessions),
    }


def locomo_source(path: str | Path) -> dict:
    return {"data": "locomo", "path": str(path)}


def data_tag(source: dict) -> str:
    """A short name of the data for trajectory ids ("synthetic-s1000", "locomo")."""
    return f"synthetic-s{source['seed']}" if source["data"] == "synthetic" else "locomo"


def _data_key(source: dict) -> tuple:
    if source.get("data") == "synthetic":
        return ("synthetic", source["seed"], source["num_conversations"],
                source["sessions_per_conversation"])  # fmt: skip
    if source.get("data") == "locomo":
        return ("locomo", source["path"])
    raise ValueError(f"source data {source.get('data')!r}; valid: 'synthetic', 'locomo'")


def _synthetic_config(source: dict) -> SyntheticConfig:
    return SyntheticConfig(
        num_conversations=int(source["num_conversations"]),
        sessions_per_conversation=int(source["sessions_per_conversation"]),
        seed=int(source["seed"]),
    )


def answerable(conversation: Conversation) -> list:
    """QA items the answer agent trains on: category 5 left out (Memory-R1), an answer given."""
    return [q for q in conversation.qa if q.category != ADVERSARIAL and q.answer is not None]


@dataclasses.dataclass(frozen=True)
class MemorySettings:
    construction: ConstructionSettings = ConstructionSettings()
    answer: AnswerSettings = AnswerSettings()
    k_per_speaker: int = 30  # memories per speaker in the answer prompt (the paper's 30)
    locomo_date_only: bool = False  # raw-turn memories dated "8 May, 2023" instead of in full

    def as_dict(self) -> dict:
        return {
            "related_k": self.construction.related_k,
            "fact_context_turns": self.construction.fact_context_turns,
            "answer_style": self.answer.style,
            "distill": self.answer.distill,
            "metric": self.answer.metric,
            "k_per_speaker": self.k_per_speaker,
            "locomo_date_only": self.locomo_date_only,
        }


class MemoryWorld:
    def __init__(self, embedder, settings: MemorySettings = MemorySettings()):
        self.embedder = embedder
        self.settings = settings
        self._conversations: dict[tuple, dict[str, Conversation]] = {}
        self._events: dict[tuple, dict[str, list[TrackEvent]]] = {}
        self._banks: dict[tuple, MemoryBank] = {}
        self._examples: dict[tuple, dict[int, AnswerExample]] = {}

    def conversations(self, source: dict) -> dict[str, Conversation]:
        key = _data_key(source)
        if key not in self._conversations:
            if source["data"] == "synthetic":
                convs = generate_conversations(_synthetic_config(source))
            else:
                convs = load_locomo(source["path"])
            self._conversations[key] = {c.sample_id: c for c in convs}
        return self._conversations[key]

    def conversation(self, source: dict) -> Conversation:
        convs = self.conversations(source)
        conv_id = source.get("conversation_id")
        if conv_id not in convs:
            raise KeyError(f"source names conversation {conv_id!r}, not in the data")
        return convs[conv_id]

    def events(self, source: dict) -> dict[str, list[TrackEvent]]:
        """conversation id -> track events (synthetic data only)."""
        if source["data"] != "synthetic":
            raise ValueError(f"{source['data']} data carries no fact tracks")
        key = _data_key(source)
        if key not in self._events:
            self._events[key] = _track_events(_synthetic_config(source))
        return self._events[key]

    def fact_oracle(self, source: dict, conversations: Sequence[Conversation]) -> FactOracle:
        events = self.events(source)
        return FactOracle(
            [conversation_stream(c) for c in conversations],
            [events[c.sample_id] for c in conversations],
            self.settings.construction.fact_context_turns,
        )

    def manager_oracle(self, source: dict, conversation: Conversation) -> ManagerOracle:
        return ManagerOracle(self.events(source)[conversation.sample_id])

    def answer_examples(self, source: dict) -> dict[int, AnswerExample]:
        """qa index -> the answer agent's example (its retrieved memories) for every
        answerable question of the source's conversation, retrieved in one batch as the
        evaluation does, and remembered: a replay sees the retrieval the teacher saw."""
        conv = self.conversation(source)
        key = (*_data_key(source), conv.sample_id)
        if key not in self._examples:
            items = answerable(conv)
            bank, k = self.answer_bank(source), self.settings.k_per_speaker
            examples = answer_examples(conv.sample_id, conv.speakers, bank, items, k)
            self._examples[key] = {q.index: e for q, e in zip(items, examples)}
        return self._examples[key]

    def answer_bank(self, source: dict) -> MemoryBank:
        """The bank the answer agent reads for the source's conversation."""
        conv = self.conversation(source)
        key = (*_data_key(source), conv.sample_id)
        if key not in self._banks:
            if source["data"] == "synthetic":
                built = build_banks(
                    [conversation_stream(conv)],
                    self.fact_oracle(source, [conv]),
                    self.manager_oracle(source, conv),
                    self.embedder,
                    self.settings.construction,
                )
                self._banks[key] = built.banks[0]
            else:
                date_only = self.settings.locomo_date_only
                self._banks[key] = raw_turn_bank(conv, self.embedder, date_only=date_only)
        return self._banks[key]
