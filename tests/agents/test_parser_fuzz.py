"""Every parser of model output, fed 2,000+ generated inputs each: random bytes, truncated and
nested JSON, 1,000-deep brackets, huge and Unicode numbers, unbalanced and repeated tags and
1 MB outputs. No input may raise, and none may take more than a (generous) second."""

import functools
import json
import random
import time

import pytest

from memjax.agents.memory_r1.answer_parser import parse_answer
from memjax.agents.memory_r1.fact_parser import parse_facts
from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.agents.memsearcher.reward import validate_format
from memjax.agents.search_r1.format import extract_answer, parse_action
from memjax.agents.search_tool import SearchSettings, plan_search
from memjax.agents.tool_format import extract_boxed, last_tag_content, parse_tool_call, tags_paired
from memjax.eval.judge import parse_judge_reply
from memjax.text.json_extract import first_object, salvage_array_items

INPUTS_PER_PARSER = 2_000
SECONDS_PER_INPUT = 1.0
IDS = IdMap.from_memories([("m-a", "Caroline has a dog"), ("m-b", "Melanie paints")])
ODD_NUMBERS = ["9" * 5000, "²", "٣", "１２", "1e999", "-0", "1." + "7" * 5000, "NaN", "0x1F"]
TAGS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<memory>", "</memory>"]
TAGS += ["<search>", "</search>", "<answer>", "</answer>", "\\boxed{", "}", "```json\n", "```"]
TAGS += ["**Answer:**", "**Answer**:", "- ", "\n", '{"memory": [', '{"facts": [', '{"label": ']


def _plan(text):
    parsed = parse_tool_call(text)
    return None if parsed is None else plan_search(parsed, SearchSettings())


PARSERS = {
    "manager": lambda t: parse_manager_output(t, IDS),
    "facts": parse_facts,
    "answer": parse_answer,
    "judge": parse_judge_reply,
    "first_object": lambda t: first_object(t, required_key="memory"),
    "salvage": lambda t: salvage_array_items(t, "facts"),
    "tool_call": _plan,
    "memsearcher_format": lambda t: validate_format([t, t]),
    "memsearcher_memory": lambda t: last_tag_content(t, "memory"),
    "boxed": extract_boxed,
    "tags_paired": lambda t: tags_paired(t, "tool_call"),
    "search_r1_action": parse_action,
    "search_r1_answer": extract_answer,
}


def _valid_output(rng: random.Random) -> str:
    item = {"id": rng.choice([0, 1, "1", rng.choice(ODD_NUMBERS)]), "event": "UPDATE"}
    item["text"] = rng.choice(["Caroline has two dogs", "x" * rng.randint(0, 50), "²"])
    kind = rng.randrange(5)
    if kind == 0:
        return json.dumps({"memory": [item, {"event": "ADD", "text": "Melanie runs"}]})
    if kind == 1:
        return json.dumps({"facts": ["Caroline adopted a dog", {"name": "Evan", "age": 25}]})
    if kind == 2:
        return f'The answer matches. {{"label": "{rng.choice(["CORRECT", "WRONG", "²"])}"}}'
    if kind == 3:
        args = {"query": "capital of France", "top_n": rng.choice([3, "5", "²", 10**30, -1])}
        call = json.dumps({"name": "wikipedia_search", "arguments": args})
        return f"<think>look it up</think>\n<tool_call>{call}</tool_call>"
    return (
        "<think>done</think> - Caroline has a dog\n**Answer:** \\boxed{a dog} <answer>dog</answer>"
    )


def _nested(rng: random.Random) -> str:
    depth = rng.choice([10, 63, 64, 65, 500, 1000, 1001, 5000])
    opener = rng.choice(["[", "{", '{"a": ', '{"memory": [', '[ "]", ', "[{"])
    closer = {"[": "]", "{": "}", '{"a": ': "}", '{"memory": [': "]}", '[ "]", ': "]", "[{": "}]"}
    body = opener * depth + rng.choice(["1", '"x"', "", rng.choice(ODD_NUMBERS)])
    if rng.random() < 0.5:
        body += closer[opener] * depth
    return rng.choice(["", "<tool_call>", '{"facts": ', "```json\n"]) + body


def _numbers(rng: random.Random) -> str:
    n = rng.choice(ODD_NUMBERS)
    shapes = [
        '{"memory": [{"event": "DELETE", "id": %s}]}',
        '{"memory": [{"event": "DELETE", "id": "%s"}]}',
        '{"facts": [%s, "a fact"]}',
        '{"label": %s}',
        '<tool_call>{"name": "wikipedia_search", "arguments": {"query": "q", "top_n": %s}}'
        "</tool_call>",
        '<tool_call>{"name": "wikipedia_search", "arguments": {"query": "q", "top_n": "%s"}}'
        "</tool_call>",
    ]
    return rng.choice(shapes) % n


def _tags(rng: random.Random) -> str:
    return "".join(rng.choice(TAGS + ["x", " ", "{", "[", '"']) for _ in range(rng.randint(1, 400)))


def _huge(rng: random.Random) -> str:
    """About 1 MB (or, for shapes that pass the length screen, about 240 kB)."""
    shapes = [
        "{" * 1_000_000,
        "[" * 1_000_000,
        "<tool_call>" * 90_000,
        "<answer>" * 120_000,
        "- " + " " * 1_000_000,
        "\\boxed{" + "{" * 1_000_000,
        "**Answer:**" * 90_000,
        '{"memory": [' + '{"event": "ADD", "text": "x"}, ' * 33_000,
        rng.randbytes(1_000_000).decode("latin-1"),
        "{x}" * 80_000,  # under the length bound: each "{" starts a failing parse
        "{}" * 120_000,
        "- " + " " * 240_000,
        "<memory>" * 30_000,
        "```" * 80_000,
    ]
    return rng.choice(shapes)


def _random_text(rng: random.Random) -> str:
    raw = rng.randbytes(rng.randint(0, 2000))
    return raw.decode(rng.choice(["latin-1", "utf-8"]), errors="replace")


def _truncated(rng: random.Random) -> str:
    text = _valid_output(rng)
    return text[: rng.randint(0, len(text))]


def _mutated(rng: random.Random) -> str:
    text = list(_valid_output(rng))
    for _ in range(rng.randint(1, 8)):
        i = rng.randint(0, len(text))
        text[i:i] = rng.choice(TAGS + ODD_NUMBERS[1:5] + ["\x00", "\ud800", "\\", '"'])
    return "".join(text)


GENERATORS = [_random_text, _truncated, _nested, _numbers, _tags, _mutated, _valid_output]


def fuzz_inputs(seed: int, n: int = INPUTS_PER_PARSER):
    """n inputs: mostly small ones of every kind, 1 in 40 of them huge."""
    rng = random.Random(seed)
    for i in range(n):
        if i % 40 == 0:
            yield "huge", _huge(rng)
        else:
            make = rng.choice(GENERATORS)
            yield make.__name__, make(rng)


@functools.cache
def shared_inputs() -> tuple:
    return tuple(fuzz_inputs(seed=14))


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parser_never_raises_and_stays_fast(name):
    parse = PARSERS[name]
    for seed, (kind, text) in enumerate(shared_inputs()):
        t0 = time.perf_counter()
        try:
            parse(text)
        except Exception as e:  # noqa: BLE001 (any escaping exception is the failure)
            pytest.fail(f"{name} raised {type(e).__name__} on {kind} input #{seed}: {text[:80]!r}")
        elapsed = time.perf_counter() - t0
        assert elapsed < SECONDS_PER_INPUT, f"{name}: {elapsed:.2f}s on {kind} {text[:60]!r}"
