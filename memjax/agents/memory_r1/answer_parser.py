"""Reading the answer agent's output: the selected memories, then the text after **Answer:**.

The answer is the first non-empty line after the *last* marker (a model that restates the
rule before answering still gets its real answer read). "**Answer**:" is accepted as the same
marker. No marker: no answer (None), which the reward scores 0 and the metrics count.
"""

from __future__ import annotations

import dataclasses
import re

_MARKER = re.compile(r"\*\*\s*Answer\s*:\s*\*\*|\*\*\s*Answer\s*\*\*\s*:", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-•*]|\d+[.)])\s+(.*\S)\s*$")


@dataclasses.dataclass(frozen=True)
class AnswerParse:
    answer: str | None  # None when there is no marker or nothing after it
    selected_memories: tuple[str, ...]  # bullet lines before the marker (the distillation)
    has_marker: bool


def parse_answer(text: str) -> AnswerParse:
    text = text if isinstance(text, str) else ""
    matches = list(_MARKER.finditer(text))
    if not matches:
        return AnswerParse(None, _bullets(text), False)
    last = matches[-1]
    answer = None
    for line in text[last.end() :].splitlines():
        line = line.strip().strip("*").strip()
        if line:
            answer = line
            break
    return AnswerParse(answer, _bullets(text[: last.start()]), True)


def _bullets(text: str) -> tuple[str, ...]:
    return tuple(m.group(1) for line in text.splitlines() if (m := _BULLET.match(line)))
