"""The manager's decisions scored against a teacher's on the same prompt."""

import json

import pytest

from memjax.agents.memory_r1.manager_decisions import (
    OMITTED,
    compare_call,
    shown_memories,
    summarize,
)
from memjax.agents.memory_r1.manager_prompt import render_manager_prompt
from memjax.errors import DataError

MEMORIES = [
    {"id": "0", "text": "Nate works as a lawyer"},
    {"id": "1", "text": "Nate has two dogs, Ruby and Daisy"},
    {"id": "2", "text": "Nate is allergic to kiwi"},
]
FACTS = ["Nate now works as a teacher", "Nate adopted a third dog, Max"]


def _output(*items):
    return json.dumps({"memory": [dict(zip(("id", "text", "event"), i)) for i in items]})


TEACHER = _output(
    ("0", "Nate works as a teacher", "UPDATE"),
    ("1", "Nate has three dogs, Ruby, Daisy and Max", "UPDATE"),
    ("2", "Nate is allergic to kiwi", "NONE"),
)


def test_the_prompts_own_memories_are_read_not_its_worked_examples():
    prompt = render_manager_prompt(MEMORIES, FACTS)
    shown = shown_memories(prompt)
    assert shown.texts == tuple(m["text"] for m in MEMORIES)
    assert shown.real_ids == ("0", "1", "2")
    assert len(shown_memories(render_manager_prompt([], FACTS))) == 0
    broken = prompt.replace('{"id": "1"', '{"name": "1"')
    with pytest.raises(DataError, match="memory list is not"):
        shown_memories(broken)


def test_an_update_of_the_teachers_memory_matches_and_an_add_in_its_place_does_not():
    prompt = render_manager_prompt(MEMORIES, FACTS)
    student = _output(
        ("0", "Nate is a teacher", "UPDATE"),  # the right memory, other words: a match
        ("1", "Nate has two dogs, Ruby and Daisy", "NONE"),
        ("3", "Nate adopted a dog named Max", "ADD"),  # an ADD where the teacher updates
    )  # memory 2 left out
    call = compare_call(prompt, TEACHER, student)
    assert call.teacher == ("UPDATE", "UPDATE", "NONE")
    assert call.student == ("UPDATE", "NONE", OMITTED)
    assert (call.teacher_adds, call.student_adds) == (0, 1)
    assert call.well_formed

    summary = summarize([call])
    assert summary["operations"]["UPDATE"] == {
        "teacher": 2, "student": 1, "matched": 1, "teacher_calls": 1, "student_calls": 1,
    }  # fmt: skip
    assert summary["operations"]["ADD"]["matched"] == 0
    assert summary["confusion"]["UPDATE"] == {"UPDATE": 1, "NONE": 1}
    assert summary["confusion"]["NONE"] == {OMITTED: 1}


def test_a_delete_on_another_memory_is_not_a_match():
    prompt = render_manager_prompt(MEMORIES, ["Nate quit the law"])
    teacher = _output(("0", "", "DELETE"), ("1", "", "NONE"), ("2", "", "NONE"))
    student = _output(("2", "", "DELETE"))
    summary = summarize([compare_call(prompt, teacher, student)])
    assert summary["operations"]["DELETE"]["teacher"] == 1
    assert summary["operations"]["DELETE"]["student"] == 1
    assert summary["operations"]["DELETE"]["matched"] == 0
    assert summary["confusion"]["DELETE"] == {OMITTED: 1}


def test_malformed_output_is_counted_never_raised():
    prompt = render_manager_prompt(MEMORIES, FACTS)
    calls = [
        compare_call(prompt, TEACHER, "I think the memory is fine."),
        compare_call(prompt, TEACHER, _output(("7", "x", "UPDATE"))),  # an id never shown
    ]
    assert [c.well_formed for c in calls] == [False, False]
    assert calls[0].student == (OMITTED,) * 3
    summary = summarize(calls)
    assert summary["well_formed_rate"] == 0.0
    assert summary["rejections"] == {"no_json": 1, "unknown_id": 1}
