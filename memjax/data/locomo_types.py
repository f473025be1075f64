"""Typed LoCoMo records: a conversation of dated sessions of turns, and its QA items."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Turn:
    speaker: str
    dia_id: str  # "D<session>:<turn>", the id evidence lists cite
    text: str
    # Optional image fields: LoCoMo turns that share a photo carry its BLIP caption; the
    # caption is the only view of the image a text model gets.
    image_urls: tuple[str, ...] = ()
    blip_caption: str | None = None
    image_query: str | None = None
    re_download: bool | None = None

    def display_text(self) -> str:
        """The turn as a text model should see it: the caption appended when there is one."""
        if self.blip_caption:
            return f"{self.text} [shares {self.blip_caption}]"
        return self.text


@dataclasses.dataclass(frozen=True)
class Session:
    index: int  # N of "session_N"
    date_time: str  # as written in the file, e.g. "1:56 pm on 8 May, 2023"
    turns: tuple[Turn, ...]

    @property
    def timestamp(self) -> datetime.datetime | None:
        return parse_locomo_datetime(self.date_time)


@dataclasses.dataclass(frozen=True)
class QAItem:
    index: int  # position in the conversation's `qa` list: a stable id for the question
    question: str
    answer: str | None  # str() of the file's answer (six are ints); None for most category 5
    category: int  # 1..5, see memjax.data.categories for the names
    evidence: tuple[str, ...]  # cleaned dia_ids, e.g. ("D8:6", "D9:17")
    raw_evidence: tuple[str, ...]  # the file's strings, unchanged, so nothing is lost
    adversarial_answer: str | None = None  # category 5: the tempting wrong answer

    @property
    def has_answer(self) -> bool:
        return self.answer is not None


@dataclasses.dataclass(frozen=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    qa: tuple[QAItem, ...]
    # Dates whose session_N is absent (conv-26 has session_20..35 dates only); kept, not used.
    orphan_session_dates: Mapping[int, str] = dataclasses.field(default_factory=dict)
    session_summaries: Mapping[int, str] = dataclasses.field(default_factory=dict)
    # Annotations memjax does not interpret, kept as parsed JSON.
    event_summary: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    observation: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def speakers(self) -> tuple[str, str]:
        return (self.speaker_a, self.speaker_b)

    def turns(self) -> list[tuple[Session, Turn]]:
        """Every turn in order, with its session (for its date)."""
        return [(s, t) for s in self.sessions for t in s.turns]

    def turn_by_dia_id(self) -> dict[str, tuple[Session, Turn]]:
        return {t.dia_id: (s, t) for s, t in self.turns()}


_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


def parse_locomo_datetime(text: str) -> datetime.datetime | None:
    """ "1:56 pm on 8 May, 2023" -> datetime; None when the string has another shape."""
    try:
        return datetime.datetime.strptime(text.strip(), _DATE_FORMAT)
    except ValueError:
        return None
