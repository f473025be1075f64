"""Reading the memory manager's JSON into operations, defensively.

Malformed output is a normal event during RL: every item that cannot become a valid operation
is rejected with a reason and counted; nothing raises. Rules:
- JSON is looked for in code fences and then anywhere in the text; if the output stops
  mid-array, the complete items before the cut are kept (status "salvaged").
- event must be ADD, UPDATE, DELETE or NONE (case and spaces forgiven); anything else
  (e.g. "NOOP", "MODIFY") is rejected as unknown_event.
- ADD needs non-empty text; its id is ignored (the bank assigns real ids).
- UPDATE and DELETE need an id the model was shown (IdMap); UPDATE needs non-empty text.
  old_text is the memory's real current text, not the model's claim in old_memory.
- NONE is accepted with or without a known id.
- One operation per memory: a second UPDATE/DELETE/NONE naming the same id is rejected as
  duplicate_id (first wins); an ADD repeating an earlier ADD's text is duplicate_add.
- Output that memjax.bounded_input refuses (too long, nested too deep) is rejected whole with
  that reason; a value it refuses (an integer of more than 18 digits) makes its object
  unreadable, so the items before it are salvaged and the reason is counted (once per output).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Literal

from memjax.agents.memory_r1.id_map import IdMap
from memjax.text.json_extract import first_object, salvage_array_items, screened

Op = Literal["ADD", "UPDATE", "DELETE", "NONE"]
EVENTS: tuple[str, ...] = ("ADD", "UPDATE", "DELETE", "NONE")
JsonStatus = Literal["ok", "salvaged", "no_json"]


@dataclasses.dataclass(frozen=True)
class MemoryOp:
    """One operation for the memory bank to apply (real ids; None for ADD)."""

    op: Op
    real_id: str | None
    text: str  # ADD/UPDATE: the new text; DELETE/NONE: the memory's current text (or the model's)
    old_text: str | None = None  # UPDATE/DELETE: the memory's text before the operation


@dataclasses.dataclass(frozen=True)
class Rejection:
    reason: str
    item: Any  # the offending JSON item (or None for whole-output problems)


@dataclasses.dataclass(frozen=True)
class ManagerParse:
    ops: tuple[MemoryOp, ...]
    rejections: tuple[Rejection, ...]
    json_status: JsonStatus

    @property
    def well_formed(self) -> bool:
        """Clean JSON and every item valid: what a format reward would check."""
        return self.json_status == "ok" and not self.rejections

    def counts(self) -> Counter:
        """For metrics: accepted ops by kind, rejections by reason, and the JSON status."""
        c = Counter(f"op_{op.op.lower()}" for op in self.ops)
        c.update(f"rejected_{r.reason}" for r in self.rejections)
        c[f"json_{self.json_status}"] += 1
        return c


def _items(text: str) -> tuple[list[Any] | None, JsonStatus, list[Rejection]]:
    problems: Counter = Counter()
    if screened(text, problems) is None:
        return None, "no_json", [Rejection(reason, None) for reason in problems]
    obj = first_object(text, required_key="memory", problems=problems)
    found: list[Rejection] = [Rejection(r, None) for r in problems]  # each reason once
    if obj is not None:
        if isinstance(obj["memory"], list):
            return obj["memory"], "ok", found
        return [], "ok", found + [Rejection("memory_not_a_list", obj["memory"])]
    seen = set(problems)
    salvaged = salvage_array_items(text, "memory", problems)
    found += [Rejection(r, None) for r in problems if r not in seen]
    if salvaged is not None:
        items, _ = salvaged
        return items, "salvaged", found + [Rejection("truncated", None)]
    return None, "no_json", found + [Rejection("no_json", None)]


def _text_field(item: dict, key: str) -> str:
    value = item.get(key)
    return value.strip() if isinstance(value, str) else ""


def parse_manager_output(text: str, id_map: IdMap) -> ManagerParse:
    """Model output + the id map its prompt used -> accepted ops and counted rejections."""
    items, status, rejections = _items(text if isinstance(text, str) else "")
    ops: list[MemoryOp] = []
    claimed: set[int] = set()  # prompt positions that already have an operation
    added: set[str] = set()
    for item in items or []:
        if not isinstance(item, dict):
            rejections.append(Rejection("not_an_object", item))
            continue
        event = item.get("event")
        event = event.strip().upper() if isinstance(event, str) else None
        if event not in EVENTS:
            rejections.append(Rejection("unknown_event", item))
            continue
        new_text = _text_field(item, "text")
        if event == "ADD":
            if not new_text:
                rejections.append(Rejection("empty_text", item))
            elif new_text.casefold() in added:
                rejections.append(Rejection("duplicate_add", item))
            else:
                added.add(new_text.casefold())
                ops.append(MemoryOp("ADD", None, new_text))
            continue
        index = id_map.index_of(item.get("id"))
        if index is None and event == "NONE":
            ops.append(MemoryOp("NONE", None, new_text))  # "irrelevant fact": harmless
            continue
        if index is None:
            reason = "missing_id" if item.get("id") in (None, "") else "unknown_id"
            rejections.append(Rejection(reason, item))
            continue
        if index in claimed:
            rejections.append(Rejection("duplicate_id", item))
            continue
        real_id, current = id_map.real_ids[index], id_map.texts[index]
        if event == "UPDATE":
            if not new_text:
                rejections.append(Rejection("empty_text", item))
                continue
            ops.append(MemoryOp("UPDATE", real_id, new_text, old_text=current))
        elif event == "DELETE":
            ops.append(MemoryOp("DELETE", real_id, current, old_text=current))
        else:
            ops.append(MemoryOp("NONE", real_id, current))
        claimed.add(index)
    return ManagerParse(tuple(ops), tuple(rejections), status)
