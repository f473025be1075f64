"""Finding JSON in free-form model output, defensively.

Models wrap JSON in code fences, put prose around it, or stop mid-object. These helpers never
raise: they return what could be read, and say how it was read, so callers can count.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
_LANGUAGE_TAG = re.compile(r"^[a-zA-Z]*[ \t]*\n?")
_DECODER = json.JSONDecoder()


def candidate_texts(text: str) -> list[str]:
    """Fenced blocks first (where models put JSON), then the whole text."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    unclosed = text.rfind("```")
    if len(blocks) == 0 and unclosed != -1:
        # Opened, never closed (output cut off): drop the language tag, keep the rest.
        blocks.append(_LANGUAGE_TAG.sub("", text[unclosed + 3 :], count=1))
    return blocks + [text]


def first_object(text: str, required_key: str | None = None) -> dict[str, Any] | None:
    """The first complete JSON object (with `required_key`, if given) anywhere in the text."""
    for candidate in candidate_texts(text):
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = _DECODER.raw_decode(candidate, start)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict) and (required_key is None or required_key in value):
                return value
            start = candidate.find("{", start + 1)
    return None


def salvage_array_items(text: str, key: str) -> tuple[list[Any], bool] | None:
    """Items of the array under `"key": [` that are complete, for output cut off mid-array.

    Returns (items, complete) where complete says the array closed; None when no such array
    starts anywhere.
    """
    for candidate in candidate_texts(text):
        match = re.search(r'"' + re.escape(key) + r'"\s*:\s*\[', candidate)
        if match is None:
            continue
        pos, items = match.end(), []
        while True:
            while pos < len(candidate) and candidate[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(candidate):
                return items, False
            if candidate[pos] == "]":
                return items, True
            try:
                item, pos = _DECODER.raw_decode(candidate, pos)
            except json.JSONDecodeError:
                return items, False
            items.append(item)
    return None
