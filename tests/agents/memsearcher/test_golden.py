"""MemSearcher golden examples: each trajectory gets the reward the paper's code gives.

Reward: 0 if the final completion lacks EOS or the final context's format is invalid; else the
boxed answer's F1 if above 0; else 0.1.
"""

import pytest

from memjax.agents.memsearcher import MemSearcherEpisode, MemSearcherSettings, validate_format
from memjax.agents.memsearcher.prompts import context_messages
from memjax.agents.memsearcher.reward import reward
from memjax.agents.retrieval import ScriptedRetriever, passage
from tests.agents.scripted import boxed, feed, memory, tool_call, word_count

QUESTION = "Between Harvey Pekar and Denise Levertov who was born earlier?"
GOLD = ["Denise Levertov"]
FACT = "Denise Levertov was born in 1923; Harvey Pekar in 1939."


@pytest.fixture
def retriever():
    return ScriptedRetriever(
        {"Denise Levertov birth": [passage("7", "Denise Levertov", "Born 24 October 1923.")]},
        default=[passage("1", "Harvey Pekar", "Born October 8, 1939.")],
    )


def play(outputs, retriever, **settings):
    episode = MemSearcherEpisode(QUESTION, word_count, MemSearcherSettings(**settings))
    return feed(episode, outputs, retriever).result(GOLD)


SEARCH_THEN_MEMORY = [tool_call("Denise Levertov birth"), memory(FACT)]


def test_valid_correct(retriever):
    result = play([*SEARCH_THEN_MEMORY, boxed("Denise Levertov")], retriever)
    assert (result.reward, result.stop_reason, result.answer) == (1.0, "answer", "Denise Levertov")
    assert len(result.contexts) == 2 and result.format_valid
    assert result.searches == ["Denise Levertov birth"]


def test_valid_partial_answer_gets_its_f1(retriever):
    result = play([*SEARCH_THEN_MEMORY, boxed("Levertov")], retriever)
    assert result.reward == pytest.approx(2 / 3)


def test_valid_wrong_answer_gets_format_reward(retriever):
    result = play([*SEARCH_THEN_MEMORY, boxed("Harvey Pekar")], retriever)
    assert result.reward == 0.1 and result.format_valid


def test_answer_without_search(retriever):
    result = play([boxed("Denise Levertov", thought="I know this.")], retriever)
    assert result.reward == 1.0 and len(result.contexts) == 1 and retriever.calls == []


def test_missing_think_close(retriever):
    # The turn starts with "<think>", and the model never closes it.
    result = play(["I know this. \\boxed{Denise Levertov}"], retriever)
    assert result.reward == 0.0 and not result.format_valid


def test_missing_think_entirely(retriever):
    result = play(["\\boxed{Denise Levertov}"], retriever, think_prefix="")
    assert result.reward == 0.0
    assert validate_format(["\\boxed{Denise Levertov}"]).reason == "message 0: no <think>"


def test_no_boxed(retriever):
    result = play(["I know this.</think> It is Denise Levertov."], retriever)
    assert (result.reward, result.answer, result.stop_reason) == (0.0, None, "answer")


def test_unclosed_boxed(retriever):
    result = play(["ok</think> \\boxed{Denise Levertov"], retriever)
    assert result.reward == 0.0


def test_no_eos(retriever):
    result = play([*SEARCH_THEN_MEMORY, (boxed("Denise Levertov"), False)], retriever)
    assert (result.reward, result.stop_reason) == (0.0, "no_eos")


def test_no_eos_in_the_action_call_ends_the_trajectory(retriever):
    result = play([(tool_call("Denise Levertov birth"), False)], retriever)
    assert (result.reward, result.stop_reason) == (0.0, "no_eos") and retriever.calls == []
    assert result.stopped_in == "action"


def test_the_call_that_ended_an_episode_is_named(retriever):
    cut_memory = play([tool_call("Denise Levertov birth"), (memory(FACT), False)], retriever)
    assert (cut_memory.stop_reason, cut_memory.stopped_in) == ("no_eos", "memory")
    answered = play([*SEARCH_THEN_MEMORY, boxed("Denise Levertov")], retriever)
    assert (answered.stop_reason, answered.stopped_in) == ("answer", "action")
    limit = play(SEARCH_THEN_MEMORY, retriever, max_turns=1)
    assert (limit.stop_reason, limit.stopped_in) == ("turn_limit", "memory")


def test_memory_over_the_cap(retriever):
    # Cap of 5 "tokens" (words here); the memory is not truncated: the trajectory ends.
    result = play(SEARCH_THEN_MEMORY, retriever, memory_cap_tokens=5)
    assert (result.reward, result.stop_reason) == (0.0, "memory_over_cap")
    # The same memory under a cap that fits goes on to the next context.
    ok = play([*SEARCH_THEN_MEMORY, boxed("Denise Levertov")], retriever, memory_cap_tokens=10)
    assert ok.reward == 1.0


def test_no_memory_tags(retriever):
    result = play([tool_call("Denise Levertov birth"), FACT], retriever)
    assert (result.reward, result.stop_reason) == (0.0, "no_memory")


def test_broken_tool_call_json(retriever):
    broken = 'Search.</think>\n<tool_call>\n{"name": "wikipedia_search", "arguments": {"query": }\n</tool_call>'
    episode = MemSearcherEpisode(QUESTION, word_count, MemSearcherSettings(max_turns=1))
    feed(episode, [broken, memory("nothing yet")], retriever)
    result = episode.result(GOLD)
    # No search runs; the tool response reports the error; the trajectory's reward is 0.
    assert retriever.calls == [] and result.reward == 0.0
    response = result.contexts[0].calls[1].messages[-1]["content"]
    assert response.startswith("<tool_response>") and "not valid JSON" in response
    # The reward rule checks the JSON in isolation too: the same final context with a good call
    # is valid, with the broken one it is not.
    good = f"<think>{tool_call('q')}"
    assert validate_format([good, memory("m") + " \\boxed{Denise Levertov}"]).valid
    bad = validate_format([f"<think>{broken}", memory("m") + " \\boxed{Denise Levertov}"])
    assert not bad.valid and "not valid JSON" in bad.reason
    assert reward([f"<think>{broken}", "\\boxed{Denise Levertov}"], True, GOLD).reward == 0.0


def test_tool_call_without_arguments_is_invalid():
    call = '<think>x</think><tool_call>{"name": "wikipedia_search"}</tool_call>'
    assert "needs" in validate_format([call, "\\boxed{a}"]).reason


def test_turn_limit(retriever):
    searching = [tool_call("Harvey Pekar"), memory("Pekar: 1939.")] * 2
    result = play(searching, retriever, max_turns=2)
    assert (result.reward, result.stop_reason, len(result.contexts)) == (0.0, "turn_limit", 2)


def test_default_turn_limits():
    from memjax.agents.memsearcher.episode import EVAL_MAX_TURNS, TRAIN_MAX_TURNS

    assert (MemSearcherSettings().max_turns, TRAIN_MAX_TURNS, EVAL_MAX_TURNS) == (5, 5, 20)
    assert MemSearcherSettings().memory_cap_tokens == 1024


def test_each_context_is_rebuilt_from_question_and_memory(retriever):
    result = play([*SEARCH_THEN_MEMORY, boxed("Denise Levertov")], retriever)
    first, second = result.contexts
    assert first.calls[0].messages == context_messages(QUESTION, "")
    assert first.calls[0].assistant_prefix == "<think>"
    # The second context holds the system prompt, the question and the memory: nothing else.
    assert second.calls[0].messages == context_messages(QUESTION, FACT)
    assert (
        (second.calls[0].messages[1]["content"])
        == "<question> " + QUESTION + " </question>\n\n<memory> " + FACT + " </memory>"
    )
    # The memory call sees the action and the tool response, with the update request.
    memory_call = first.calls[1]
    assert [m["role"] for m in memory_call.messages] == ["system", "user", "assistant", "user"]
    assert memory_call.messages[2]["content"].startswith("<think>I should search.</think>")
    tool_response = memory_call.messages[3]["content"]
    assert tool_response.startswith("<tool_response>{")
    assert '"Denise Levertov"\nBorn 24 October 1923.\n</tool_response>\n' in tool_response
    assert tool_response.endswith("Return the updated memory within <memory> </memory> tags.")


def test_top_n_default_and_cap(retriever):
    play([tool_call("a"), memory("m"), boxed("x")], retriever)
    play([tool_call("b", top_n=3), memory("m"), boxed("x")], retriever)
    play([tool_call("c", top_n=500), memory("m"), boxed("x")], retriever)
    # Omitted top_n gets the server default (10), as in the paper's code; huge ones are capped.
    assert [k for _, k in retriever.calls] == [10, 3, 10]
