"""Token ids, loss masks and per-turn context tokens with the real SmolLM2 tokenizer.

The token-accounting test drives MemSearcher, ReAct and Search-R1 through the same scripted
searches: MemSearcher's context stays under template + question + memory cap + one tool
response (+ its own two completions), while the growing baselines pass that bound.
"""

import pytest

from memjax.agents.episode import ContextRecord, ModelCall, ModelOutput, run_episodes
from memjax.agents.memsearcher import MemSearcherEpisode, MemSearcherSettings
from memjax.agents.memsearcher.prompts import context_messages
from memjax.agents.memsearcher.react import ReActEpisode, ReActSettings
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.search_r1 import SearchR1Episode, SearchR1Settings
from memjax.agents.transcript import (
    ENV,
    MODEL,
    PROMPT,
    TemplateMismatchError,
    chat_format,
    count_tokens,
    prompt_length,
    segments,
    tokens_and_mask,
    turn_token_counts,
)
from memjax.checkpoints.packaged import smollm2_gguf
from memjax.checkpoints.tokenizer import load_tokenizer
from memjax.eval import token_report
from tests.agents.scripted import boxed, memory, tool_call

QUESTION = "Which city hosted the games described in the archive?"
N_SEARCHES = 6
CAP = 64


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(smollm2_gguf())


@pytest.fixture(scope="module")
def fmt(tokenizer):
    return chat_format(tokenizer)


def retriever():
    text = " ".join(f"Archive record {i} lists a venue, a date and a winner." for i in range(5))
    return ScriptedRetriever(default=[passage(str(i), f"Archive {i}", text) for i in range(3)])


def searches_made(call):
    """How many tool responses the conversation already holds (ReAct / MemSearcher)."""
    return sum(m["content"].startswith("<tool_response>") for m in call.messages)


def memsearcher_policy(tokenizer):
    facts = []

    def policy(call):
        last = call.messages[-1]["content"]
        if last.startswith("<tool_response>"):
            facts.append(
                f"Search {len(facts) + 1} found that the archive lists a venue in a northern "
                "city, a date in late summer and a winner from abroad."
            )
            ids = tokenizer.encode(" ".join(facts))[-CAP:]  # keep the newest facts under the cap
            return ModelOutput(memory(tokenizer.decode(ids).strip()), True)
        if len(facts) >= N_SEARCHES:
            return ModelOutput(boxed("Paris"), True)
        return ModelOutput(tool_call(f"archive games {len(facts)}", top_n=3), True)

    return policy


def react_policy(call):
    if searches_made(call) >= N_SEARCHES:
        return ModelOutput(boxed("Paris"), True)
    return ModelOutput(tool_call(f"archive games {searches_made(call)}", top_n=3), True)


def search_r1_policy(call):
    n = call.assistant_prefix.count("<information>")
    if n >= N_SEARCHES:
        return ModelOutput("I have enough.</think>\n<answer> Paris </answer>", True)
    return ModelOutput(
        f"<think>I should search.</think>\n<search> archive games {n} </search>", False
    )


def test_masks_cover_exactly_the_model_tokens(tokenizer, fmt):
    episode = MemSearcherEpisode(QUESTION, lambda s: len(tokenizer.encode(s)))
    run_episodes([episode], memsearcher_policy(tokenizer), retriever())
    context = episode.result(["Paris"]).contexts[0]
    kinds = [s.kind for s in segments(context, fmt)]
    assert kinds == [PROMPT, MODEL, ENV, MODEL]
    ids, mask = tokens_and_mask(context, fmt)
    assert len(ids) == len(mask)
    model_text = tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=False)
    action, update = context.outputs
    assert model_text == f"{action.text}<|im_end|>{update.text}<|im_end|>"
    env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    assert "<tool_response>" in env_text and "Archive record 4" in env_text
    assert "<question>" in env_text  # the prompt is masked too
    # Encoding segment by segment matches encoding the whole context at once.
    assert ids == tokenizer.encode("".join(s.text for s in segments(context, fmt)))
    first_model = mask.index(1)
    assert prompt_length(context, fmt) == first_model
    assert tokenizer.decode(ids[:first_model], skip_special_tokens=False).endswith("<think>")


def test_sampled_token_ids_are_used_as_given(fmt):
    sampled = (11, 22, 33, fmt.eos_id)
    record = ContextRecord(
        [ModelCall(context_messages("q?", ""), "<think>")], [ModelOutput("x", True, sampled)]
    )
    ids, mask = tokens_and_mask(record, fmt)
    assert tuple(ids[-4:]) == sampled and mask[-4:] == [1] * 4 and sum(mask) == 4


def test_a_prompt_that_does_not_extend_the_context_is_an_error(fmt):
    first = ModelCall(context_messages("q?", ""), "<think>")
    other = ModelCall(context_messages("another question?", ""), "")
    record = ContextRecord([first, other], [ModelOutput("a", True), ModelOutput("b", True)])
    with pytest.raises(TemplateMismatchError, match="call 1"):
        segments(record, fmt)


def test_memsearcher_context_is_bounded_while_baselines_grow(tokenizer, fmt, tmp_path):
    count = lambda s: len(tokenizer.encode(s))  # noqa: E731
    mem = MemSearcherEpisode(
        QUESTION, count, MemSearcherSettings(max_turns=20, memory_cap_tokens=CAP)
    )
    run_episodes([mem], memsearcher_policy(tokenizer), retriever())
    react = ReActEpisode(QUESTION, ReActSettings(max_turns=20))
    run_episodes([react], react_policy, retriever())
    sr1 = SearchR1Episode(QUESTION, SearchR1Settings(max_turns=20))
    run_episodes([sr1], search_r1_policy, retriever())
    results = {"memsearcher": mem.result(["Paris"]), "react": react.result(["Paris"])}
    results["search_r1"] = sr1.result(["Paris"])
    for name, result in results.items():
        assert result.reward == 1.0, name
        assert len(result.turn_contexts) == N_SEARCHES + 1, name
    counts = {name: turn_token_counts(r.turn_contexts, fmt) for name, r in results.items()}

    # The bound: the template with the question and an empty memory, the memory cap, one tool
    # response, and the context's own two completions (the longest action; a capped memory).
    template = count_tokens(
        ContextRecord([ModelCall(context_messages(QUESTION, ""), "<think>")]), fmt
    )
    one_response = max(
        len(tokenizer.encode(s.text))
        for c in results["memsearcher"].contexts
        for s in segments(c, fmt)
        if s.kind == ENV
    )
    longest_action = max(count(tool_call(f"archive games {i}", top_n=3)) for i in range(N_SEARCHES))
    memory_output = CAP + count(memory("")) + 2  # tags, EOS and a merge at the cut
    bound = template + CAP + one_response + longest_action + 1 + memory_output
    assert max(counts["memsearcher"]) <= bound
    # Flat once the memory saturates; the growing contexts add a tool response every turn.
    # From turn 4 both the memory read (in the prompt) and the memory written are at the cap.
    mem_tail = counts["memsearcher"][3:N_SEARCHES]
    assert max(mem_tail) - min(mem_tail) <= 8
    for name in ("react", "search_r1"):
        steps = [b - a for a, b in zip(counts[name], counts[name][1:])]
        assert all(step > 0.8 * one_response for step in steps[: N_SEARCHES - 1]), (name, steps)
        assert counts[name][-1] > bound + 2 * one_response, name

    table = {name: token_report.turn_stats([c]) for name, c in counts.items()}
    paths = token_report.write_reports(table, tmp_path)
    assert "| 1 |" in paths["markdown"].read_text()
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
