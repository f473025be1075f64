"""Reading the answer agent's output: the selected memories, then the text after **Answer:**.

The answer is the first non-empty line after the *last* marker (a model that restates the
rule before answering still gets its real answer read). "**Answer**:" is accepted as the same
marker. No marker: no answer (None), which the reward scores 0 and the metrics count. Output
that memjax.bounded_input refuses (over its length bound) has no answer either, and says why
in `refused`. Every pattern here matches in time linear in the line it reads.
"""

from __future__ import annotations

import dataclasses
import re

from memjax.bounded_input import MAX_TEXT_CHARS, NOT_TEXT, TOO_LONG

_MARKER = re.compile(r"\*\*\s*Answer\s*:\s*\*\*|\*\*\s*Answer\s*\*\*\s*:", re.IGNORECASE)
# The bullet's head only; its text is the rest of the line, stripped. (One pattern for the
# whole line, `\s+(.*\S)\s*$`, backtracks quadratically over a line of spaces.)
_BULLET_HEAD = re.compile(r"\s*(?:[-•*]|\d+[.)])\s")


@dataclasses.dataclass(frozen=True)
class AnswerParse:
    answer: str | None  # None when there is no marker or nothing after it
    selected_memories: tuple[str, ...]  # bullet lines before the marker (the distillation)
    has_marker: bool
    refused: str | None = None  # why memjax.bounded_input refused the output, if it did


def parse_answer(text: str) -> AnswerParse:
    if not isinstance(text, str):
        return AnswerParse(None, (), False, None if text is None else NOT_TEXT)
    if len(text) > MAX_TEXT_CHARS:
        return AnswerParse(None, (), False, TOO_LONG)
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
    out = []
    for line in text.splitlines():
        head = _BULLET_HEAD.match(line)
        rest = line[head.end() :].strip() if head else ""
        if rest:
            out.append(rest)
    return tuple(out)
