"""LongMemEval loader on a small fixture in the documented schema."""

import json

import pytest

from memjax.data.longmemeval import LongMemEvalFormatError, load_longmemeval


def _instance(qid="q1", qtype="knowledge-update", answer="two"):
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "How many dogs do I have?",
        "answer": answer,
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/20 (Sat) 18:30"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I adopted a dog, Max.", "has_answer": True},
                {"role": "assistant", "content": "Congratulations!"},
            ],
            [{"role": "user", "content": "We got a second dog, Bella.", "has_answer": True}],
        ],
        "answer_session_ids": ["s1", "s2"],
    }


def test_loads_the_documented_schema(tmp_path):
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps([_instance(), _instance("q2_abs", "multi-session", 3)]))
    first, second = load_longmemeval(path)
    assert first.question_type == "knowledge-update" and not first.is_abstention
    assert [s.session_id for s in first.sessions] == ["s1", "s2"]
    assert first.sessions[1].date == "2023/05/20 (Sat) 18:30"
    assert first.sessions[0].turns[1].has_answer is False
    assert [t.content for _, t in first.evidence_turns()] == [
        "I adopted a dog, Max.",
        "We got a second dog, Bella.",
    ]
    assert second.is_abstention and second.answer == "3"


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda x: x.pop("question"), "[0].question"),
        (lambda x: x.update(question_type="trivia"), "[0].question_type"),
        (lambda x: x["haystack_dates"].pop(), "[0].haystack_sessions"),
        (lambda x: x["haystack_sessions"][0][0].pop("role"), "[0].haystack_sessions[0][0].role"),
        (
            lambda x: x["haystack_sessions"][1][0].update(has_answer="yes"),
            "[0].haystack_sessions[1][0].has_answer",
        ),
        (lambda x: x.update(answer_session_ids=[1]), "[0].answer_session_ids[0]"),
    ],
)
def test_malformed_input_names_file_and_field(tmp_path, mutate, field):
    inst = _instance()
    mutate(inst)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([inst]))
    with pytest.raises(
        LongMemEvalFormatError, match=f"^{path}: " + field.replace("[", r"\[").replace("]", r"\]")
    ):
        load_longmemeval(path)
