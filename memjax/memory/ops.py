"""Memory operations (ADD / UPDATE / DELETE / NOOP), their provenance, and their outcomes.

Model output is untrusted: `MemoryOp.from_model` turns one item of the Mem0 / Memory-R1 update
schema (`{"id", "text", "event": "ADD"|"UPDATE"|"DELETE"|"NONE", "old_memory"}`) into an op
without raising; whatever is wrong with it is found by the bank, which rejects and counts it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

ADD, UPDATE, DELETE, NOOP = "ADD", "UPDATE", "DELETE", "NOOP"
KINDS = (ADD, UPDATE, DELETE, NOOP)
_ALIASES = {"NONE": NOOP, "NO_OP": NOOP, "NOCHANGE": NOOP, "NO CHANGE": NOOP, "DEL": DELETE}

# Why an op was rejected (the keys of MemoryBank.rejected).
UNKNOWN_KIND = "unknown_kind"
MISSING_ID = "missing_id"
UNKNOWN_ID = "unknown_id"
DUPLICATE_ID = "duplicate_id"
EMPTY_TEXT = "empty_text"
TEXT_TOO_LONG = "text_too_long"
BAD_FIELD = "bad_field"  # a field of the wrong type (owner, timestamp, id)


@dataclasses.dataclass(frozen=True)
class MemoryOp:
    kind: str
    id: str | None = None  # ADD: optional (the bank assigns one); UPDATE/DELETE: required
    text: str | None = None  # ADD/UPDATE: the memory's (new) text
    owner: str | None = None  # ADD: the speaker the memory is about (default: bank's)
    timestamp: str | None = None  # the session date the fact comes from

    @classmethod
    def from_model(cls, item: Any, owner: str | None = None, timestamp: str | None = None):
        """One item of a model's JSON output -> an op (never raises)."""
        if not isinstance(item, dict):
            return cls(kind=f"<{type(item).__name__}>")
        event = item.get("event", item.get("op", ""))
        kind = str(event).strip().upper()
        kind = _ALIASES.get(kind, kind)
        doc_id = item.get("id")
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)  # models often write ids as numbers
        return cls(kind=kind, id=doc_id, text=item.get("text"), owner=owner, timestamp=timestamp)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where an op came from: which dialogue turn, which model output, and when."""

    source_turn: str | None = None  # e.g. LoCoMo's dia_id "D3:5", or a turn index
    model_output: str | None = None  # the raw completion the op was parsed from
    time: float | None = None  # unix time; the bank fills it in when None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class OpResult:
    accepted: bool
    id: str | None = None  # the entry the op touched (the new id for ADD)
    reason: str | None = None  # one of the rejection constants above when rejected
