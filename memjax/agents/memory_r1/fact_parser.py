"""Reading the fact extractor's {"facts": [...]} defensively (never raises, counts problems)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from memjax.agents.json_extract import first_object, salvage_array_items


@dataclasses.dataclass(frozen=True)
class FactsParse:
    facts: tuple[str, ...]  # non-empty, stripped, de-duplicated, in order
    json_status: Literal["ok", "salvaged", "no_json"]
    rejected: int  # items that were not non-empty strings, or repeated


def parse_facts(text: str) -> FactsParse:
    text = text if isinstance(text, str) else ""
    obj = first_object(text, required_key="facts")
    status: Literal["ok", "salvaged", "no_json"]
    if obj is not None:
        raw = obj["facts"] if isinstance(obj["facts"], list) else [obj["facts"]]
        status = "ok"
    elif (salvaged := salvage_array_items(text, "facts")) is not None:
        raw, status = salvaged[0], "salvaged"
    else:
        return FactsParse((), "no_json", 0)
    facts: list[str] = []
    rejected = 0
    for item in raw:
        fact = item.strip() if isinstance(item, str) else ""
        if not fact or fact in facts:
            rejected += 1
        else:
            facts.append(fact)
    return FactsParse(tuple(facts), status, rejected)
