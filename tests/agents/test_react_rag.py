"""ReAct-style growing-context baseline, plain RAG, and batched driving of mixed episodes."""

import pytest

from memjax.agents.episode import ModelOutput, advance, run_episodes
from memjax.agents.memsearcher import MemSearcherEpisode
from memjax.agents.memsearcher.react import SYSTEM_PROMPT, ReActEpisode, ReActSettings
from memjax.agents.rag import RagSettings, make_rag_episodes
from memjax.agents.retrieval import Retriever, ScriptedRetriever, passage
from memjax.agents.search_r1 import SearchR1Episode
from memjax.agents.search_tool import WIKIPEDIA_SEARCH_TOOL
from tests.agents.scripted import boxed, feed, memory, tool_call, word_count

GOLD = ["Denise Levertov"]


@pytest.fixture
def retriever():
    return ScriptedRetriever(default=[passage("1", "A", "alpha"), passage("2", "B", "beta")])


def test_scripted_retriever_satisfies_the_protocol(retriever):
    assert isinstance(retriever, Retriever)
    assert retriever.search(["x", "y"], 1) == [[passage("1", "A", "alpha")]] * 2


def test_tool_schema():
    function = WIKIPEDIA_SEARCH_TOOL["function"]
    assert function["name"] == "wikipedia_search"
    props = function["parameters"]["properties"]
    assert props["query"]["type"] == "string" and props["top_n"]["type"] == "integer"
    assert "default value is 5" in props["top_n"]["description"]
    assert '"name": "wikipedia_search"' in SYSTEM_PROMPT


def test_react_context_keeps_everything(retriever):
    outputs = [tool_call("one", top_n=2), tool_call("two", top_n=2), boxed("Denise Levertov")]
    result = feed(ReActEpisode("Who?", ReActSettings(max_turns=5)), outputs, retriever).result(GOLD)
    assert (result.reward, result.answer, result.stop_reason) == (1.0, GOLD[0], "answer")
    (context,) = result.contexts
    last = context.calls[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    # The passages are joined with MemSearcher's literal backslash-n separator.
    assert last[3]["content"] == (
        '<tool_response>{"name": "wikipedia_search", "arguments": {"query": "one", "top_n": 2}}\n'
        '"A"\nalpha\\n\\n"B"\nbeta\n</tool_response>'
    )
    assert len(result.turn_contexts) == 3


def test_react_reward_follows_memsearcher_rules(retriever):
    wrong = feed(ReActEpisode("Who?"), [tool_call("x"), boxed("nobody")], retriever)
    assert wrong.result(GOLD).reward == 0.1
    no_box = feed(ReActEpisode("Who?"), ["hmm</think> Denise Levertov"], retriever)
    assert no_box.result(GOLD).reward == 0.0
    limit = feed(ReActEpisode("Who?", ReActSettings(max_turns=2)), [tool_call("x")] * 2, retriever)
    assert (limit.result(GOLD).stop_reason, limit.result(GOLD).reward) == ("turn_limit", 0.0)


def test_rag_retrieves_once_and_scores_em(retriever):
    episodes = make_rag_episodes(["Who?", "What?"], retriever, RagSettings(top_k=2))
    assert retriever.calls == [(["Who?", "What?"], 2)]
    system = episodes[0].current_call().messages[0]["content"]
    assert 'Doc 1(Title: "A") alpha\nDoc 2(Title: "B") beta' in system
    episodes[0].observe(ModelOutput("\\boxed{Denise Levertov}", True))
    episodes[1].observe(ModelOutput("  Denise Levertov\n", True))
    first, second = (e.result(GOLD) for e in episodes)
    assert (first.answer, first.reward, first.format_valid) == (GOLD[0], 1.0, True)
    assert (second.answer, second.reward, second.format_valid) == (GOLD[0], 1.0, False)


def test_advance_batches_searches_across_episodes(retriever):
    episodes = [
        MemSearcherEpisode("q1?", word_count),
        MemSearcherEpisode("q2?", word_count),
        ReActEpisode("q3?"),
        SearchR1Episode("q4?"),
    ]
    outputs = [
        ModelOutput(tool_call("a", top_n=2), True),
        ModelOutput(tool_call("b", top_n=2), True),
        ModelOutput(tool_call("c", top_n=2), True),
        ModelOutput("<search> d </search>", False),
    ]
    advance(episodes, outputs, retriever)
    # One call per distinct k: three tool calls with top_n=2, Search-R1's default k=3.
    assert sorted(retriever.calls) == [(["a", "b", "c"], 2), (["d"], 3)]
    assert all(not e.done for e in episodes)
    assert episodes[0].current_call().messages[-1]["content"].startswith("<tool_response>")


def test_run_episodes_with_a_policy(retriever):
    def policy(call):
        if call.messages[-1]["content"].startswith("<tool_response>"):
            return ModelOutput(memory("alpha beta"), True)
        if "alpha" in call.messages[1]["content"]:
            return ModelOutput(boxed("Denise Levertov"), True)
        return ModelOutput(tool_call("who"), True)

    episodes = [MemSearcherEpisode(f"q{i}?", word_count) for i in range(3)]
    run_episodes(episodes, policy, retriever)
    assert [e.result(GOLD).reward for e in episodes] == [1.0] * 3
    assert len(retriever.calls) == 1  # the three searches went in one batch


def test_misuse_is_an_error(retriever):
    episode = MemSearcherEpisode("q?", word_count)
    with pytest.raises(RuntimeError):
        episode.receive([])
    with pytest.raises(RuntimeError):
        episode.result(GOLD)
    with pytest.raises(ValueError, match="outputs"):
        advance([episode], [], retriever)
