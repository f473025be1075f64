"""Parsing facts and answers, and the EM/F1 rewards on the text after **Answer:**."""

import pytest

from memjax.agents.memory_r1 import answer_reward, answer_score, parse_answer, parse_facts


def test_parse_facts():
    assert parse_facts('{"facts": ["Adopted a dog", "Lives in Boston"]}').facts == (
        "Adopted a dog",
        "Lives in Boston",
    )
    fenced = parse_facts('```json\n{"facts": [" a ", "", 3, "a", "b"]}\n```')
    assert fenced.facts == ("a", "b") and fenced.rejected == 3 and fenced.json_status == "ok"
    cut = parse_facts('{"facts": ["Adopted a dog", "Lives in Bos')
    assert cut.facts == ("Adopted a dog",) and cut.json_status == "salvaged"
    assert parse_facts("no facts here").json_status == "no_json"
    assert parse_facts('{"facts": "one fact"}').facts == ("one fact",)
    assert parse_facts(None).facts == ()


def test_parse_facts_keeps_flat_objects_and_rejects_nested_ones():
    # SmolLM2-135M's habit: facts as objects, sometimes nested without end.
    flat = parse_facts('{"facts": [{"name": "Evan", "age": 25, "pet": null}, "Likes tea"]}')
    assert flat.facts == ("name: Evan; age: 25", "Likes tea") and flat.flattened == 1
    nested = parse_facts('{"facts": [{"name": {"name": "Evan"}}, {}, {"name": "Evan", "age": 25}]}')
    assert nested.facts == ("name: Evan; age: 25",) and nested.rejected == 2
    looping = parse_facts('{"facts":[{"name":{"name":{"name":{"name":{"name')
    assert looping.facts == () and looping.json_status == "salvaged"


def test_parse_answer_reads_after_the_last_marker():
    out = (
        "**Memories selected as relevant:**\n"
        "- 8 May 2023: Adopted a dog named Max\n"
        "• 27 June 2023: Adopted a second dog, Bella\n\n"
        "**Answer:** two"
    )
    parsed = parse_answer(out)
    assert parsed.answer == "two" and parsed.has_marker
    assert parsed.selected_memories == (
        "8 May 2023: Adopted a dog named Max",
        "27 June 2023: Adopted a second dog, Bella",
    )
    assert (
        parse_answer("Rule: answer after **Answer:**\n**Answer:**\n\n  Paris  ").answer == "Paris"
    )
    assert parse_answer("**Answer**: *beach*").answer == "beach"
    assert parse_answer("The answer is beach.").answer is None
    assert parse_answer("**Answer:**   ").answer is None
    assert parse_answer(None).has_marker is False


def test_rewards():
    assert answer_reward("- m1\n**Answer:** The beach!", "beach") == 1.0
    assert answer_reward("**Answer:** a beach house", "beach") == 0.0
    assert answer_reward("beach", "beach") == 0.0  # no marker, no answer
    assert answer_reward("**Answer:** a beach house", "beach", metric="f1") == pytest.approx(2 / 4)
    assert answer_score(None, "beach", "f1") == 0.0
    with pytest.raises(ValueError, match="unknown reward metric"):
        answer_score("x", "x", "bleu")  # type: ignore[arg-type]


def test_short_answer_f1_pays_less_for_a_copied_memory_than_plain_f1():
    gold = "painting classes"
    short = "painting classes"
    copied = "1:45 pm on 9 December, 2023: Evan signed up for painting classes with his friends"
    assert answer_score(short, gold, "f1_short") == answer_score(short, gold, "f1") == 1.0
    f1 = answer_score(copied, gold, "f1")  # 2 of 15 distinct words: P 2/15, R 1
    assert f1 == pytest.approx(2 * (2 / 15) / (2 / 15 + 1))
    # 15 words against a budget of 6: scaled by 6/15.
    assert answer_score(copied, gold, "f1_short") == pytest.approx(f1 * 6 / 15)
    # Within the budget the two agree; a gold longer than 6 words is its own budget.
    assert answer_score("he went painting", gold, "f1_short") == answer_score(
        "he went painting", gold, "f1"
    )
    long_gold = "a trip to the mountains with his whole family"
    assert answer_score(long_gold, long_gold, "f1_short") == 1.0
    assert answer_score(None, gold, "f1_short") == 0.0
