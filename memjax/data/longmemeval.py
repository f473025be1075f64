"""Loader for LongMemEval (`longmemeval_{s,m,oracle}.json`) into typed instances.

Schema (xiaowu0162/LongMemEval): a list of instances, each with question_id (an `_abs` suffix
marks an abstention question), question_type, question, answer, question_date,
haystack_session_ids, haystack_dates, haystack_sessions (a list of sessions, each a list of
{"role", "content"} turns, `has_answer: true` on evidence turns) and answer_session_ids.
Malformed input raises LongMemEvalFormatError naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from memjax.data.jsonl_io import read_json_file
from memjax.errors import DataError

QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)


class LongMemEvalFormatError(DataError):
    """A LongMemEval file does not follow the documented schema."""


@dataclasses.dataclass(frozen=True)
class ChatTurn:
    role: str  # "user" | "assistant"
    content: str
    has_answer: bool = False  # an evidence turn


@dataclasses.dataclass(frozen=True)
class HaystackSession:
    session_id: str
    date: str
    turns: tuple[ChatTurn, ...]


@dataclasses.dataclass(frozen=True)
class LongMemEvalInstance:
    question_id: str
    question_type: str
    question: str
    answer: str  # str() of the file's answer (some are numbers)
    question_date: str
    sessions: tuple[HaystackSession, ...]
    answer_session_ids: tuple[str, ...]

    @property
    def is_abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    def evidence_turns(self) -> list[tuple[HaystackSession, ChatTurn]]:
        return [(s, t) for s in self.sessions for t in s.turns if t.has_answer]


def _fail(source: str, path: str, problem: str) -> LongMemEvalFormatError:
    return LongMemEvalFormatError(f"{source}: {path}: {problem}")


def _get(source: str, obj: dict, key: str, path: str, kind: type | tuple[type, ...]) -> Any:
    if key not in obj:
        raise _fail(source, f"{path}.{key}", "missing required field")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise _fail(source, f"{path}.{key}", f"expected {kind}, got {type(value).__name__}")
    return value


def _str_list(source: str, obj: dict, key: str, path: str) -> list[str]:
    values = _get(source, obj, key, path, list)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise _fail(source, f"{path}.{key}[{i}]", f"expected str, got {type(v).__name__}")
    return values


def _parse_instance(source: str, raw: Any, path: str) -> LongMemEvalInstance:
    if not isinstance(raw, dict):
        raise _fail(source, path, f"expected an object, got {type(raw).__name__}")
    question_type = _get(source, raw, "question_type", path, str)
    if question_type not in QUESTION_TYPES:
        raise _fail(source, f"{path}.question_type", f"{question_type!r} not in {QUESTION_TYPES}")
    session_ids = _str_list(source, raw, "haystack_session_ids", path)
    dates = _str_list(source, raw, "haystack_dates", path)
    raw_sessions = _get(source, raw, "haystack_sessions", path, list)
    if not len(session_ids) == len(dates) == len(raw_sessions):
        raise _fail(
            source,
            f"{path}.haystack_sessions",
            f"lengths differ: {len(session_ids)} ids, {len(dates)} dates, "
            f"{len(raw_sessions)} sessions",
        )
    sessions = []
    for i, (sid, date, raw_turns) in enumerate(zip(session_ids, dates, raw_sessions)):
        spath = f"{path}.haystack_sessions[{i}]"
        if not isinstance(raw_turns, list):
            raise _fail(source, spath, f"expected a list of turns, got {type(raw_turns).__name__}")
        turns = []
        for j, t in enumerate(raw_turns):
            tpath = f"{spath}[{j}]"
            if not isinstance(t, dict):
                raise _fail(source, tpath, f"expected an object, got {type(t).__name__}")
            has_answer = t.get("has_answer", False)
            if not isinstance(has_answer, bool):
                raise _fail(source, f"{tpath}.has_answer", "expected bool")
            turns.append(
                ChatTurn(
                    role=_get(source, t, "role", tpath, str),
                    content=_get(source, t, "content", tpath, str),
                    has_answer=has_answer,
                )
            )
        sessions.append(HaystackSession(session_id=sid, date=date, turns=tuple(turns)))
    return LongMemEvalInstance(
        question_id=_get(source, raw, "question_id", path, str),
        question_type=question_type,
        question=_get(source, raw, "question", path, str),
        answer=str(_get(source, raw, "answer", path, (str, int, float))),
        question_date=_get(source, raw, "question_date", path, str),
        sessions=tuple(sessions),
        answer_session_ids=tuple(_str_list(source, raw, "answer_session_ids", path)),
    )


def parse_longmemeval(data: Any, source: str = "<longmemeval>") -> list[LongMemEvalInstance]:
    if not isinstance(data, list):
        raise _fail(source, "<top level>", f"expected a list, got {type(data).__name__}")
    return [_parse_instance(source, x, f"[{i}]") for i, x in enumerate(data)]


def load_longmemeval(path: str | os.PathLike) -> list[LongMemEvalInstance]:
    source = os.fspath(path)
    data = read_json_file(source, LongMemEvalFormatError)
    return parse_longmemeval(data, source=source)
