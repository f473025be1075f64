"""Finding JSON in free-form model output, defensively.

Models wrap JSON in code fences, put prose around it, or stop mid-object. These helpers never
raise: they return what could be read, and say how it was read, so callers can count. Every
text goes through `memjax.bounded_input` first (length, nesting depth, integer size), and a
search gives up after `MAX_FAILED_STARTS` "{" that begin no valid JSON, because each failed
attempt costs time proportional to its position: the work stays linear in the text.

`problems`, where a function takes it, is a Counter that receives the reasons (see
memjax.bounded_input) why text or values were refused, for the caller's metrics.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from memjax.bounded_input import INVALID_JSON, decode_at, screen

_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
_LANGUAGE_TAG = re.compile(r"^[a-zA-Z]*[ \t]*\n?")
_ANY_START = re.compile(r"\{")
_KEYED_START = re.compile(r'\{\s*"')  # an object with a key starts this way
MAX_FAILED_STARTS = 64
TOO_MANY_STARTS = "too_many_json_starts"


def candidate_texts(text: str) -> list[str]:
    """Fenced blocks first (where models put JSON), then the whole text."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    unclosed = text.rfind("```")
    if len(blocks) == 0 and unclosed != -1:
        # Opened, never closed (output cut off): drop the language tag, keep the rest.
        blocks.append(_LANGUAGE_TAG.sub("", text[unclosed + 3 :], count=1))
    return blocks + [text]


def _note(problems: Counter | None, reason: str | None) -> None:
    if problems is not None and reason is not None and reason != INVALID_JSON:
        problems[reason] += 1


def screened(text: object, problems: Counter | None = None) -> str | None:
    """`text` when it may be parsed, else None (and its reason counted in `problems`)."""
    reason = screen(text)
    _note(problems, reason)
    return None if reason is not None else text  # type: ignore[return-value]


def first_object(
    text: str, required_key: str | None = None, problems: Counter | None = None
) -> dict[str, Any] | None:
    """The first complete JSON object (with `required_key`, if given) anywhere in the text."""
    if screened(text, problems) is None:
        return None
    failures = 0
    starts = _ANY_START if required_key is None else _KEYED_START
    for candidate in candidate_texts(text):
        for match in starts.finditer(candidate):
            value, _, reason = decode_at(candidate, match.start())
            if reason is not None:
                _note(problems, reason)
                failures += 1
                if failures > MAX_FAILED_STARTS:
                    _note(problems, TOO_MANY_STARTS)
                    return None
            elif isinstance(value, dict) and (required_key is None or required_key in value):
                return value
    return None


def salvage_array_items(
    text: str, key: str, problems: Counter | None = None
) -> tuple[list[Any], bool] | None:
    """Items of the array under `"key": [` that are complete, for output cut off mid-array.

    Returns (items, complete) where complete says the array closed; None when no such array
    starts anywhere.
    """
    if screened(text, problems) is None:
        return None
    opening = re.compile(r'"' + re.escape(key) + r'"\s*:\s*\[')
    for candidate in candidate_texts(text):
        match = opening.search(candidate)
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
            item, pos, reason = decode_at(candidate, pos)
            if reason is not None:
                _note(problems, reason)
                return items, False
            items.append(item)
    return None
