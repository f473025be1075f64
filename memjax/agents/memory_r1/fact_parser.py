"""Reading the fact extractor's {"facts": [...]} defensively (never raises, counts problems).

Small models often write a fact as an object instead of a string, e.g.
{"name": "Evan", "occupation": "designer"}. A flat object (scalar values only) still states a
fact, so it is kept as "name: Evan; occupation: designer" and counted as `flattened`; nested
objects (the usual sign of a model looping) are rejected. Output that memjax.bounded_input
refuses (too long, nested too deep, integers of more than 18 digits) names its reasons in
`refused`; the facts that could still be read are kept.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Literal

from memjax.text.json_extract import first_object, salvage_array_items, screened


@dataclasses.dataclass(frozen=True)
class FactsParse:
    facts: tuple[str, ...]  # non-empty, stripped, de-duplicated, in order
    json_status: Literal["ok", "salvaged", "no_json"]
    rejected: int  # items that were neither non-empty strings nor flat objects, or repeated
    flattened: int = 0  # flat objects kept as "key: value; ..." strings
    refused: tuple[str, ...] = ()  # why bounded_input refused the output or a value in it


def parse_facts(text: str) -> FactsParse:
    text = text if isinstance(text, str) else ""
    problems: Counter = Counter()
    if screened(text, problems) is None:
        return FactsParse((), "no_json", 0, refused=tuple(sorted(problems)))
    obj = first_object(text, required_key="facts", problems=problems)
    status: Literal["ok", "salvaged", "no_json"]
    if obj is not None:
        raw = obj["facts"] if isinstance(obj["facts"], list) else [obj["facts"]]
        status = "ok"
    elif (salvaged := salvage_array_items(text, "facts", problems)) is not None:
        raw, status = salvaged[0], "salvaged"
    else:
        return FactsParse((), "no_json", 0, refused=tuple(sorted(problems)))
    facts: list[str] = []
    rejected = flattened = 0
    for item in raw:
        fact = _flat_object_text(item) if isinstance(item, dict) else item
        fact = fact.strip() if isinstance(fact, str) else ""
        if not fact or fact in facts:
            rejected += 1
            continue
        facts.append(fact)
        flattened += isinstance(item, dict)
    return FactsParse(tuple(facts), status, rejected, flattened, tuple(sorted(problems)))


def _flat_object_text(item: dict[str, Any]) -> str:
    """{"name": "Evan", "age": 25} -> "name: Evan; age: 25"; "" when any value is not a scalar."""
    parts = []
    for key, value in item.items():
        if isinstance(value, (dict, list)):
            return ""
        if value is not None and str(value).strip():
            parts.append(f"{key}: {str(value).strip()}")
    return "; ".join(parts)
