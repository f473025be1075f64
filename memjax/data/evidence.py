"""Cleaning LoCoMo evidence strings into dia_ids.

The released file has a few malformed entries: "D8:6; D9:17" (two ids in one string),
"D9:1 D4:4 D4:6" (space-separated), "D:11:26" (an extra colon) and "D" (nothing). Rather than
guess at "D", we keep every id that can be read unambiguously and drop the rest; the raw
strings stay on the QA item.
"""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[;,\s]+")
# "D8:6" and the "D:11:26" typo (a colon after D) both mean session 11, turn 26.
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def clean_evidence(raw: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Raw evidence strings -> unique dia_ids "D<s>:<t>", in first-seen order."""
    out: list[str] = []
    for entry in raw:
        for piece in _SEPARATORS.split(entry.strip()):
            match = _DIA_ID.fullmatch(piece)
            if match is None:
                continue  # e.g. "D": no session or turn to recover
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id not in out:
                out.append(dia_id)
    return tuple(out)


def is_well_formed(entry: str) -> bool:
    return re.fullmatch(r"D\d+:\d+", entry) is not None
