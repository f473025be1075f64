"""LLM-as-a-judge prompt rendering and defensive parsing of the judge's reply."""

import pytest

from memjax.eval.judge import JudgeTally, JudgeVerdict, parse_judge_reply, render_judge_prompt


def test_prompt_carries_the_three_inputs_and_the_json_instruction():
    prompt = render_judge_prompt("Where does Ann live?", "Paris", "She lives in {Paris}")
    assert "Question: Where does Ann live?\nGold answer: Paris\n" in prompt
    assert "Generated answer: She lives in {Paris}\n" in prompt  # braces are not formatted
    assert 'with the key "label"' in prompt and "generous" in prompt
    assert '{"label": "CORRECT"}' in prompt


@pytest.mark.parametrize(
    "reply, label, status",
    [
        ('Same place. {"label": "CORRECT"}', "CORRECT", "json"),
        ('```json\n{"label": "wrong"}\n```', "WRONG", "json"),
        ('{"reason": "x"} then {"label": " Correct "}', "CORRECT", "json"),
        ("The answer is incorrect. WRONG", "WRONG", "fallback"),
        ('{"label": "MAYBE"} but CORRECT', "CORRECT", "fallback"),
        ("CORRECT or WRONG, hard to say", None, "invalid"),
        ('{"label": "CORR', None, "invalid"),
        ('{"label": "MAYBE"}', None, "invalid"),
        ("", None, "invalid"),
    ],
)
def test_parse_judge_reply(reply, label, status):
    assert parse_judge_reply(reply) == JudgeVerdict(label, status)


def test_tally_counts_statuses_and_scores_unreadable_as_wrong():
    tally = JudgeTally()
    for reply in ('{"label": "CORRECT"}', "WRONG", "???", '{"label": "CORRECT"}'):
        tally.add(parse_judge_reply(reply))
    assert tally.total == 4 and tally.correct == 2 and tally.accuracy == 0.5
    assert dict(tally.status) == {"json": 2, "fallback": 1, "invalid": 1}
    assert parse_judge_reply("???").score == 0.0
