"""MemSearcher's protocol as the authors' code reads a completion (icip-cas/MemSearcher @ 83a3bea,
vllm_rollout_spmd.py::vLLMRolloutWithTool and reward_score/re_call.py), with the episode
settings read from the paper configs."""

import json
import runpy
from pathlib import Path

import pytest

from memjax.agents.episode import ModelOutput, advance
from memjax.agents.memsearcher import MemSearcherEpisode
from memjax.agents.memsearcher.prompts import MEMORY_UPDATE_REQUEST
from memjax.agents.memsearcher.protocol import IM_START, boxed_answer, first_memory, tool_calls
from memjax.agents.memsearcher.settings import EpisodeSettings
from memjax.agents.retrieval import ScriptedRetriever, passage
from tests.agents.scripted import boxed, feed, memory, tool_call, word_count

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
GOLD = ["Denise Levertov"]


@pytest.fixture(params=["memsearcher_qwen7b.py", "memsearcher_cpu.py"])
def settings(request):
    config = runpy.run_path(str(CONFIGS / request.param))["get_config"]()
    return EpisodeSettings.from_config(config).memsearcher(evaluation=False)


@pytest.fixture
def retriever():
    return ScriptedRetriever(
        {
            "Levertov": [passage("7", "Denise Levertov", "Born 24 October 1923.")],
            "Pekar": [passage("1", "Harvey Pekar", "Born October 8, 1939.")],
        }
    )


def call_json(query):
    return json.dumps({"name": "wikipedia_search", "arguments": {"query": query}})


def test_every_call_samples_with_the_im_start_stop(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    assert episode.current_call().stop == (IM_START,)
    episode.observe(ModelOutput(tool_call("Levertov"), True))
    episode.receive(retriever.search(["Levertov"], 3)[0])
    assert episode.current_call().stop == (IM_START,)  # the memory update too


def test_a_completion_stopped_on_im_start_ends_with_reward_zero(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    feed(episode, [boxed("Denise Levertov") + IM_START], retriever)
    result = episode.result(GOLD)
    assert (result.stop_reason, result.reward) == ("im_start_stop", 0.0)


def test_every_tool_call_of_a_response_runs_and_answers_in_one_message(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    action = (
        f"Two searches.</think>\n<tool_call>\n{call_json('Levertov')}\n</tool_call>\n"
        f"<tool_call>\n{call_json('Pekar')}\n</tool_call>"
    )
    advance([episode], [ModelOutput(action, True)], retriever)
    assert [queries for queries, _ in retriever.calls] == [["Levertov"], ["Pekar"]]
    assert episode.searches == ["Levertov", "Pekar"]
    response = episode.current_call().messages[-1]["content"]
    # <tool_response>{call}\n{result}\n</tool_response>\n<request>, once per call, no separator.
    blocks = response.split(MEMORY_UPDATE_REQUEST)
    assert len(blocks) == 3 and blocks[-1] == ""
    assert blocks[0].startswith(f"<tool_response>{call_json('Levertov')}\n")
    assert "Born 24 October 1923." in blocks[0] and "Born October 8, 1939." in blocks[1]
    assert blocks[1].startswith(f"<tool_response>{call_json('Pekar')}\n")


def test_an_unclosed_tool_call_is_an_answer_turn(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    feed(episode, ["Search.</think>\n<tool_call>\n" + call_json("Levertov")], retriever)
    result = episode.result(GOLD)
    assert result.stop_reason == "answer" and retriever.calls == []
    assert (result.reward, result.format_valid) == (0.0, False)  # unpaired <tool_call>


def test_the_first_memory_block_is_kept(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    feed(
        episode,
        [tool_call("Levertov"), "<memory>first</memory> <memory>second</memory>", boxed("x")],
        retriever,
    )
    assert episode.memory == "first"


def test_an_empty_memory_ends_the_trajectory(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    feed(episode, [tool_call("Levertov"), memory("   ")], retriever)
    assert (episode.stop_reason, episode.result(GOLD).reward) == ("empty_memory", 0.0)


# Golden values: what `remove_boxed(last_boxed_only_string(text))` of re_call.py returns.
@pytest.mark.parametrize(
    "text, answer",
    [
        ("The answer is \\boxed{Denise Levertov}.", "Denise Levertov"),
        ("is \\[ \\boxed{20C} \\].", "20C"),
        ("\\boxed{a} then \\boxed{b {c} d}", "b {c} d"),
        ("The answer is \\boxed Denise Levertov$.", "Denise Levertov"),
        ("\\boxed Denise Levertov", "Denise Levertov"),
        ("\\boxed A then \\boxed{B}", "A then \\boxed{B}"),  # the space form wins anywhere
        ("\\boxed{never closed", None),
        ("\\boxed\n{x}", None),
        ("no answer", None),
    ],
)
def test_boxed_forms_the_authors_accept(text, answer):
    assert boxed_answer(text) == answer


def test_the_space_form_scores_its_f1(settings, retriever):
    episode = MemSearcherEpisode(QUESTION, word_count, settings)
    feed(episode, ["I know.</think> The answer is \\boxed Denise Levertov"], retriever)
    result = episode.result(GOLD)
    assert (result.reward, result.answer, result.format_valid) == (1.0, "Denise Levertov", True)


def test_parsers_follow_the_authors_tag_pairing():
    assert first_memory("<memory>a</memory></memory>") is None
    assert first_memory("no tags") is None
    assert tool_calls("</tool_call><tool_call>x") == []
    calls = tool_calls(f"<tool_call>{call_json('a')}</tool_call><tool_call>oops</tool_call>")
    assert [c.well_formed for c in calls] == [True, False]
