"""Loader for LoCoMo (`locomo10.json`) into typed conversations.

Robust to the released file's quirks (see ../shared/data/README.md): session date keys without
sessions, int answers, category 5 items without `answer`, malformed and empty evidence lists.
Anything else that is not the documented schema raises LocomoFormatError naming the file and
the field, e.g. `locomo10.json: [3].conversation.session_2[5].dia_id: expected str, got int`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from memjax.data.evidence import clean_evidence
from memjax.data.jsonl_io import read_json_file
from memjax.data.locomo_types import Conversation, QAItem, Session, Turn
from memjax.errors import DataError

_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_KEY = re.compile(r"session_(\d+)_date_time")
_SUMMARY_KEY = re.compile(r"session_(\d+)_summary")


class LocomoFormatError(DataError):
    """A LoCoMo file does not follow the documented schema; the message names file and field."""


class _Reader:
    """Typed field access that reports `source: path: problem` on any mismatch."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, problem: str) -> LocomoFormatError:
        return LocomoFormatError(f"{self.source}: {path}: {problem}")

    def get(self, obj: dict, key: str, path: str, kind: type | tuple[type, ...]) -> Any:
        if key not in obj:
            raise self.fail(f"{path}.{key}" if path else key, "missing required field")
        return self.check(obj[key], f"{path}.{key}" if path else key, kind)

    def optional(self, obj: dict, key: str, path: str, kind: type | tuple[type, ...]) -> Any:
        if key not in obj or obj[key] is None:
            return None
        return self.check(obj[key], f"{path}.{key}", kind)

    def check(self, value: Any, path: str, kind: type | tuple[type, ...]) -> Any:
        # bool is an int in Python; a category of `true` is still malformed.
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise self.fail(path, f"expected {_kind_name(kind)}, got bool")
        if not isinstance(value, kind):
            raise self.fail(path, f"expected {_kind_name(kind)}, got {type(value).__name__}")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _parse_turn(r: _Reader, raw: Any, path: str) -> Turn:
    r.check(raw, path, dict)
    urls = r.optional(raw, "img_url", path, list) or []
    for i, url in enumerate(urls):
        r.check(url, f"{path}.img_url[{i}]", str)
    return Turn(
        speaker=r.get(raw, "speaker", path, str),
        dia_id=r.get(raw, "dia_id", path, str),
        text=r.get(raw, "text", path, str),
        image_urls=tuple(urls),
        blip_caption=r.optional(raw, "blip_caption", path, str),
        image_query=r.optional(raw, "query", path, str),
        re_download=r.optional(raw, "re-download", path, bool),
    )


def _parse_qa(r: _Reader, raw: Any, index: int, path: str) -> QAItem:
    r.check(raw, path, dict)
    category = r.get(raw, "category", path, int)
    if not 1 <= category <= 5:
        raise r.fail(f"{path}.category", f"expected 1..5, got {category}")
    answer = r.optional(raw, "answer", path, (str, int, float))
    if answer is None and category != 5:
        # Only adversarial items may lack an answer; anything else is a broken file.
        raise r.fail(f"{path}.answer", f"missing for category {category}")
    raw_evidence = r.optional(raw, "evidence", path, list) or []
    for i, e in enumerate(raw_evidence):
        r.check(e, f"{path}.evidence[{i}]", str)
    return QAItem(
        index=index,
        question=r.get(raw, "question", path, str),
        # Six answers are ints (e.g. 2022); the official scorer compares str(answer).
        answer=None if answer is None else str(answer),
        category=category,
        evidence=clean_evidence(raw_evidence),
        raw_evidence=tuple(raw_evidence),
        adversarial_answer=r.optional(raw, "adversarial_answer", path, str),
    )


def _parse_sample(r: _Reader, raw: Any, path: str) -> Conversation:
    r.check(raw, path, dict)
    sample_id = r.get(raw, "sample_id", path, str)
    conv_path = f"{path}.conversation"
    conv = r.get(raw, "conversation", path, dict)
    speaker_a = r.get(conv, "speaker_a", conv_path, str)
    speaker_b = r.get(conv, "speaker_b", conv_path, str)

    # Loop over the session_N keys, not the date keys: conv-26 has dates for sessions 20..35
    # that do not exist.
    session_ids = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    dates = {int(m.group(1)): k for k in conv if (m := _DATE_KEY.fullmatch(k))}
    sessions = []
    for n in session_ids:
        key = f"session_{n}"
        raw_turns = r.get(conv, key, conv_path, list)
        if n not in dates:
            raise r.fail(f"{conv_path}.session_{n}_date_time", "missing for an existing session")
        date = r.get(conv, f"session_{n}_date_time", conv_path, str)
        turns = tuple(_parse_turn(r, t, f"{conv_path}.{key}[{i}]") for i, t in enumerate(raw_turns))
        sessions.append(Session(index=n, date_time=date, turns=turns))
    orphan_dates = {
        n: r.check(conv[k], f"{conv_path}.{k}", str)
        for n, k in sorted(dates.items())
        if n not in session_ids
    }

    qa = tuple(
        _parse_qa(r, q, i, f"{path}.qa[{i}]") for i, q in enumerate(r.get(raw, "qa", path, list))
    )
    summaries_raw = r.optional(raw, "session_summary", path, dict) or {}
    summaries = {
        int(m.group(1)): r.check(v, f"{path}.session_summary.{k}", str)
        for k, v in summaries_raw.items()
        if (m := _SUMMARY_KEY.fullmatch(k))
    }
    return Conversation(
        sample_id=sample_id,
        speaker_a=speaker_a,
        speaker_b=speaker_b,
        sessions=tuple(sessions),
        qa=qa,
        orphan_session_dates=orphan_dates,
        session_summaries=summaries,
        event_summary=r.optional(raw, "event_summary", path, dict) or {},
        observation=r.optional(raw, "observation", path, dict) or {},
    )


def parse_locomo(data: Any, source: str = "<locomo>") -> list[Conversation]:
    """Parsed JSON (a list of samples) -> conversations, in file order."""
    r = _Reader(source)
    r.check(data, "<top level>", list)
    if not data:
        raise r.fail("<top level>", "no conversations (an empty list)")
    conversations = [_parse_sample(r, s, f"[{i}]") for i, s in enumerate(data)]
    seen: set[str] = set()
    for i, c in enumerate(conversations):
        if c.sample_id in seen:
            raise r.fail(f"[{i}].sample_id", f"duplicate sample_id {c.sample_id!r}")
        seen.add(c.sample_id)
    return conversations


def load_locomo(path: str | os.PathLike) -> list[Conversation]:
    """Read a LoCoMo-format JSON file (the real `locomo10.json` or a synthetic one)."""
    source = os.fspath(path)
    data = read_json_file(source, LocomoFormatError)
    return parse_locomo(data, source=source)


def conversations_by_id(conversations: Sequence[Conversation]) -> dict[str, Conversation]:
    return {c.sample_id: c for c in conversations}
