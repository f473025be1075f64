"""The outputs that used to crash the parsers: deep nesting (RecursionError), integers of
thousands of digits and Unicode digits such as "²" (ValueError). Each is now a counted,
named rejection."""

import json

import pytest

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.construction import extract_facts
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.search_r1.format import parse_action
from memjax.agents.search_tool import SearchSettings, plan_search
from memjax.agents.tool_format import parse_tool_call
from memjax.bounded_input import ascii_int, bracket_depth, loads, screen
from memjax.eval.judge import JudgeTally, parse_judge_reply
from memjax.text.json_extract import TOO_MANY_STARTS, first_object

IDS = IdMap.from_memories([("m-a", "Caroline has a dog"), ("m-b", "Melanie paints")])
DEEP = "[" * 1000 + "]" * 1000
HUGE = "9" * 5000


def _reasons(parsed):
    return [r.reason for r in parsed.rejections]


def test_deep_nesting_is_rejected_by_name_in_every_json_parser():
    manager = parse_manager_output('{"memory": ' + DEEP + "}", IDS)
    assert manager.ops == () and _reasons(manager) == ["too_deep"]
    assert manager.counts()["rejected_too_deep"] == 1
    facts = parse_facts('{"facts": ' + DEEP + "}")
    assert facts.facts == () and facts.refused == ("too_deep",)
    verdict = parse_judge_reply('{"label": ' + DEEP + "}")
    assert verdict.label is None and verdict.refused == "too_deep"
    tally = JudgeTally()
    tally.add(verdict)
    assert tally.refused == {"too_deep": 1} and tally.status == {"invalid": 1}
    call = parse_tool_call("<tool_call>" + DEEP + "</tool_call>")
    assert not call.well_formed and call.refused == "too_deep"
    assert "nested deeper than 64 levels" in call.error


def test_nesting_hidden_in_strings_is_still_caught():
    # `[ "]"` pairs hide the depth from the raw bracket count; the parser's guard catches it.
    text = '{"memory": ' + '[ "]", ' * 3000 + "]}"
    assert bracket_depth(text) <= 2 and screen(text) is None
    parsed = parse_manager_output(text, IDS)
    assert parsed.ops == () and "too_deep" in _reasons(parsed)


@pytest.mark.parametrize("written", [HUGE, f'"{HUGE}"', '"²"', '"٣"', '"１"', "1.0", "true"])
def test_ids_that_int_cannot_read_are_unknown_ids(written):
    text = '{"memory": [{"event": "DELETE", "id": NUM}, {"event": "DELETE", "id": 1}]}'
    text = text.replace("NUM", written)
    parsed = parse_manager_output(text, IDS)
    if written == HUGE:  # the object cannot be read: the items before the number survive
        assert _reasons(parsed) == ["huge_number", "truncated"]
        assert parsed.json_status == "salvaged"
    else:
        assert _reasons(parsed) == ["unknown_id"]
        assert [(op.op, op.real_id) for op in parsed.ops] == [("DELETE", "m-b")]


def test_id_map_reads_ascii_digits_only():
    assert [IDS.index_of(x) for x in (0, "1", " 1 ", "01", "²", HUGE, 10**30, -1)] == [
        0,
        1,
        1,
        None,
        None,
        None,
        None,
        None,
    ]


@pytest.mark.parametrize("top_n", ['"²"', f'"{HUGE}"', "0", '"-3"', "2.5", "true"])
def test_tool_call_top_n_falls_back_to_the_default(top_n):
    text = '<tool_call>{"name": "wikipedia_search", "arguments": {"query": "q", "top_n": NUM}}'
    text = (text + "</tool_call>").replace("NUM", top_n)
    plan = plan_search(parse_tool_call(text), SearchSettings())
    assert plan.query == "q" and plan.k == SearchSettings().default_top_n


def test_tool_call_with_a_huge_integer_is_malformed_not_a_crash():
    text = '<tool_call>{"name": "wikipedia_search", "arguments": {"top_n": NUM}}</tool_call>'
    text = text.replace("NUM", HUGE)
    call = parse_tool_call(text)
    assert not call.well_formed and call.refused == "huge_number"
    assert plan_search(call, SearchSettings()).query is None


def test_facts_with_a_huge_integer_keep_the_facts_before_it():
    parsed = parse_facts('{"facts": ["Caroline has a dog", NUM, "lost"]}'.replace("NUM", HUGE))
    assert parsed.facts == ("Caroline has a dog",) and parsed.json_status == "salvaged"
    assert parsed.refused == ("huge_number",)  # counted once per output


def test_construction_counts_refused_fact_outputs():
    class Replies:
        def __call__(self, prompts):
            return ['{"facts": ' + DEEP + "}" for _ in prompts]

    from memjax.agents.memory_r1.construction import StreamTurn

    stream = [StreamTurn("Caroline", "D1:1", "I adopted a dog", "1 May 2023")]
    _, facts, counters = extract_facts([stream], Replies())
    assert facts == [[[]]] and counters["facts_refused_too_deep"] == 1


def test_over_long_outputs_are_refused_without_being_read():
    long = "x" * 300_000 + '{"memory": [], "facts": ["a"], "label": "CORRECT"}'
    assert _reasons(parse_manager_output(long, IDS)) == ["too_long"]
    assert parse_facts(long).refused == ("too_long",)
    assert parse_judge_reply(long).refused == "too_long"
    assert parse_answer(long + "**Answer:** dog").refused == "too_long"
    assert parse_action(long + "<answer>dog</answer>").kind == "invalid"
    assert parse_tool_call(long + "<tool_call>{}</tool_call>").refused == "too_long"


def test_failed_json_starts_are_capped_and_counted():
    from collections import Counter

    problems = Counter()
    text = '{"a" } ' * 100 + json.dumps({"memory": []})
    assert first_object(text, "memory", problems) is None
    assert problems == {TOO_MANY_STARTS: 1}
    assert first_object('{"a" } ' * 10 + json.dumps({"memory": []}), "memory") == {"memory": []}


def test_answer_bullets_on_a_line_of_spaces():
    parsed = parse_answer("- " + " " * 200_000 + "\n- Caroline has a dog\n**Answer:** a dog")
    assert parsed.selected_memories == ("Caroline has a dog",) and parsed.answer == "a dog"


def test_bounded_input_helpers():
    assert [ascii_int(x) for x in ("12", " 7 ", "-2", "²", "1e3", True, 3, 10**19)] == [
        12,
        7,
        None,
        None,
        None,
        None,
        3,
        None,
    ]
    assert ascii_int("-2", signed=True) == -2
    assert loads('{"a": [1, 2]} ') == ({"a": [1, 2]}, None)
    assert loads("[1] [2]") == (None, "invalid_json")
    assert loads(b"\xff") == (None, "not_text")
    assert loads(f'{{"topk": {HUGE}}}') == (None, "huge_number")
    assert loads(DEEP) == (None, "too_deep")
    assert bracket_depth("]] [[ ] [") == 2
