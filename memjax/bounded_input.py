"""Bounds every text from outside (model output, HTTP bodies) passes before it is parsed.

Python's own parsers have limits that raise instead of failing softly: `json` recurses once per
nesting level (about 1,000 `[` raise RecursionError), `int()` refuses more than 4,300 digits,
`str.isdigit()` accepts digits such as "²" that `int()` then rejects, and a JSONDecodeError
costs time proportional to its position (it counts the lines before it), so retrying a parse
at every "{" of a long text is quadratic. This module checks a text once, in linear time,
before any of that runs:

    reason = screen(text)        # None, or "not_text" / "too_long" / "too_deep"
    value, end, reason = decode_at(text, start)   # json.raw_decode that never raises
    value, reason = loads(text)  # a whole JSON document, never raises
    n = ascii_int("12")          # 12; None for "²", "1e3", "9" * 5000, True, ...

A rejected input is a normal event: callers count `reason` like any other malformed output.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

MAX_TEXT_CHARS = 262_144  # 256 Ki characters, about 64k tokens: above every generation budget
MAX_JSON_DEPTH = 64  # real outputs nest 2-4 levels; Python's recursion limit is about 1,000
MAX_INT_DIGITS = 18  # fits int64; ids, counts and top-k never come close

NOT_TEXT = "not_text"
TOO_LONG = "too_long"
TOO_DEEP = "too_deep"
HUGE_NUMBER = "huge_number"
INVALID_JSON = "invalid_json"

_OPEN = np.zeros(256, np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


class _HugeNumber(ValueError):
    pass


def _bounded_int(digits: str) -> int:
    # The JSON scanner only hands over ASCII digits with an optional minus sign.
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _HugeNumber(digits[:20])
    return int(digits)


_DECODER = json.JSONDecoder(parse_int=_bounded_int)


def bracket_depth(text: str) -> int:
    """The deepest run of unclosed brackets, `[` and `{` alike, counted over the raw text in
    one vectorised pass (a closer with nothing open is ignored, as a prose ")" would be).
    Brackets inside strings count too, which only ever over-counts the depth JSON sees from
    the text's first opener; parsing still guards against the rest (see decode_at)."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    steps = _OPEN[data].astype(np.int32)  # [N] +1 opener, -1 closer, 0 otherwise
    if not steps.any():
        return 0
    level = np.concatenate([[0], np.cumsum(steps)])  # [N + 1] running depth, unclamped
    # Depth with closers clamped at 0 = level minus the lowest level reached so far.
    return int((level - np.minimum.accumulate(level)).max())


def screen(text: object, max_chars: int = MAX_TEXT_CHARS, max_depth: int = MAX_JSON_DEPTH):
    """None when `text` may be parsed; otherwise why not (a counted reason)."""
    if not isinstance(text, str):
        return NOT_TEXT
    if len(text) > max_chars:
        return TOO_LONG
    if bracket_depth(text) > max_depth:
        return TOO_DEEP
    return None


def decode_at(text: str, start: int) -> tuple[Any, int, str | None]:
    """(value, end, None) for the JSON value starting at `start`, or (None, start, reason).
    Call it on a screened text: its depth is then bounded, so this stays linear in the value."""
    try:
        value, end = _DECODER.raw_decode(text, start)
    except _HugeNumber:
        return None, start, HUGE_NUMBER
    except RecursionError:  # brackets hidden from the screen by strings (e.g. `[ "]" [ "]"...`)
        return None, start, TOO_DEEP
    except (json.JSONDecodeError, ValueError):
        return None, start, INVALID_JSON
    return value, end, None


def loads(text: object, max_chars: int = MAX_TEXT_CHARS) -> tuple[Any, str | None]:
    """(value, None) for a text that is one JSON document (surrounding whitespace allowed), or
    (None, reason). Never raises."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            return None, NOT_TEXT
    reason = screen(text, max_chars)
    if reason is not None:
        return None, reason
    start = len(text) - len(text.lstrip())
    value, end, reason = decode_at(text, start)
    if reason is None and text[end:].strip():
        return None, INVALID_JSON
    return value, reason


def ascii_int(value: object, max_digits: int = MAX_INT_DIGITS, signed: bool = False) -> int | None:
    """An integer written as a JSON int or a string of ASCII digits ("3", " 3 ", "-2" when
    `signed`), at most `max_digits` long; None for anything else (bools, floats, "²", "3.0")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        bound = 10**max_digits
        return value if -bound < value < bound and (signed or value >= 0) else None
    if not isinstance(value, str):
        return None
    key = value.strip()
    digits = key[1:] if signed and key[:1] == "-" else key
    if not digits or len(digits) > max_digits or not (digits.isascii() and digits.isdigit()):
        return None
    return int(key)
