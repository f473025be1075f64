"""The memory manager's decisions against a teacher's, call by call, on the same prompts.

`memory_r1.eval` scores a manager end to end, where one wrong operation changes every later
prompt. This compares decisions where the bank is the teacher's: each prompt is a teacher
trajectory's manager call (the memories a perfect manager would hold, the turn's true facts),
and the student's output for it is read with the manager's own parser against the memories
that prompt shows. Per shown memory the teacher's event (NONE / UPDATE / DELETE) meets the
student's (or `omitted`, when the student does not list it); ADDs are counted per call.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence

from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.memory_r1.manager_prompt import MANAGER_MEMORY_TEMPLATE
from memjax.errors import DataError

SHOWN_EVENTS = ("NONE", "UPDATE", "DELETE")  # what can happen to a memory the prompt shows
OMITTED = "omitted"
_HEAD, _TAIL = MANAGER_MEMORY_TEMPLATE.text.split("{{memories}}")


def shown_memories(prompt: str) -> IdMap:
    """The memories a manager prompt lists, as the id map its call was parsed with (an empty
    map for an empty memory). The prompt's worked examples come before the real list, so the
    last listing is the one that counts."""
    start = prompt.rfind(_HEAD)
    if start < 0:
        return IdMap((), ())
    body = prompt[start + len(_HEAD) :]
    end = body.find(_TAIL)
    try:
        entries = json.loads(body[:end] if end >= 0 else body)
        return IdMap.from_memories([(str(e["id"]), str(e["text"])) for e in entries])
    except (ValueError, TypeError, KeyError) as e:  # not the default manager template's list
        raise DataError(
            f"manager prompt: its memory list is not [{{id, text}}, ...] ({e})"
        ) from None


@dataclasses.dataclass(frozen=True)
class CallDecisions:
    """One manager call: the teacher's and the student's event for every shown memory."""

    teacher: tuple[str, ...]  # [shown memories] event
    student: tuple[str, ...]  # [shown memories] event or OMITTED
    teacher_adds: int
    student_adds: int
    well_formed: bool  # clean JSON, every item valid (the format reward's test)
    rejections: tuple[str, ...]  # the student's rejected items, by reason


def _events(output: str, id_map: IdMap) -> tuple[list[str], int, object]:
    parse = parse_manager_output(output, id_map)
    by_id = {op.real_id: op.op for op in parse.ops if op.real_id is not None}
    events = [by_id.get(real_id, OMITTED) for real_id in id_map.real_ids]
    return events, sum(op.op == "ADD" for op in parse.ops), parse


def compare_call(prompt: str, teacher_output: str, student_output: str) -> CallDecisions:
    id_map = shown_memories(prompt)
    teacher, teacher_adds, _ = _events(teacher_output, id_map)
    student, student_adds, parse = _events(student_output, id_map)
    # The teacher lists every shown memory; one it leaves out is kept unchanged.
    teacher = ["NONE" if e == OMITTED else e for e in teacher]
    return CallDecisions(
        tuple(teacher),
        tuple(student),
        teacher_adds,
        student_adds,
        parse.well_formed,
        tuple(r.reason for r in parse.rejections),
    )


def summarize(calls: Sequence[CallDecisions]) -> dict:
    """Rates and counts over calls. For each operation kind: how often the teacher and the
    student use it, and `matched`: UPDATE/DELETE on the memory the teacher chose, ADDs up to
    the teacher's number in the same call. `confusion[teacher][student]` over shown memories."""
    confusion: dict[str, Counter] = {e: Counter() for e in SHOWN_EVENTS}
    kinds = {k: Counter() for k in ("ADD", "UPDATE", "DELETE")}
    rejections: Counter = Counter()
    for call in calls:
        for t, s in zip(call.teacher, call.student):
            confusion[t][s] += 1
        kinds["ADD"].update(
            teacher=call.teacher_adds,
            student=call.student_adds,
            matched=min(call.teacher_adds, call.student_adds),
            teacher_calls=call.teacher_adds > 0,
            student_calls=call.student_adds > 0,
        )
        for kind in ("UPDATE", "DELETE"):
            kinds[kind].update(
                teacher=call.teacher.count(kind),
                student=call.student.count(kind),
                matched=sum(t == s == kind for t, s in zip(call.teacher, call.student)),
                teacher_calls=kind in call.teacher,
                student_calls=kind in call.student,
            )
        rejections.update(call.rejections)
    n = len(calls)
    return {
        "calls": n,
        "well_formed": sum(c.well_formed for c in calls),
        "well_formed_rate": sum(c.well_formed for c in calls) / n if n else 0.0,
        "operations": {k: dict(v) for k, v in kinds.items()},
        "confusion": {t: dict(row) for t, row in confusion.items()},
        "rejections": dict(rejections),
    }


__all__ = ["CallDecisions", "compare_call", "shown_memories", "summarize", "OMITTED"]
