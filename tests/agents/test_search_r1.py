"""Search-R1 baseline: prompt, action parser, observation format, EM reward, episode."""

import pytest

from memjax.agents.episode import ModelOutput
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.search_r1 import (
    SearchR1Episode,
    SearchR1Settings,
    extract_answer,
    format_information,
    parse_action,
    prompt,
    reward,
)
from memjax.agents.search_r1.episode import cut_to_tokens
from memjax.agents.search_r1.format import INVALID_ACTION
from tests.agents.scripted import feed

QUESTION = "who got the first nobel prize in physics?"
GOLD = ["Wilhelm Conrad Röntgen"]


@pytest.fixture
def retriever():
    return ScriptedRetriever(
        default=[
            passage("3", "Nobel Prize in Physics", "First awarded in 1901 to Röntgen."),
            passage("9", "Wilhelm Röntgen", "German physicist."),
        ]
    )


def test_prompt_states_the_protocol():
    text = prompt(QUESTION)
    for tag in ("<think>", "<search>", "<information>", "<answer> Beijing </answer>"):
        assert tag in text
    assert text.rstrip().endswith(f"Question: {QUESTION}")


def test_parse_action_takes_the_first_complete_block():
    action = parse_action("<think>x</think><search> a b </search> junk <answer>z</answer>")
    assert (action.kind, action.content) == ("search", "a b")
    assert action.text == "<think>x</think><search> a b </search>"
    assert parse_action("<answer> Paris </answer>").content == "Paris"
    assert parse_action("<search> unclosed").kind == "invalid"


def test_information_format():
    text = format_information([passage("1", "T1", "one"), passage("2", "T2", "two\nmore")])
    assert (
        text
        == '\n\n<information>Doc 1(Title: "T1") one\nDoc 2(Title: "T2") two\nmore</information>\n\n'
    )


def test_answer_needs_two_matches_counting_the_prompts_example():
    p = prompt(QUESTION)
    assert p.count("<answer>") == 1 and "<answer>" not in INVALID_ACTION
    assert extract_answer(p) is None
    assert extract_answer(p + "<answer> Paris </answer>") == "Paris"
    assert extract_answer(p + "<answer>a</answer> then <answer> b </answer>") == "b"
    assert extract_answer("no prompt <answer> Paris </answer>") is None


def test_em_reward():
    p = prompt(QUESTION)
    assert reward(p + "<answer> Wilhelm Conrad Röntgen. </answer>", GOLD) == 1.0
    assert reward(p + "<answer> Röntgen </answer>", GOLD) == 0.0
    assert reward(p + "I think it is Wilhelm Conrad Röntgen", GOLD) == 0.0


def test_episode_search_then_answer(retriever):
    episode = SearchR1Episode(QUESTION, SearchR1Settings(max_turns=4, top_k=2))
    assert episode.current_call().stop == ("</search>", "</answer>")
    outputs = [
        ("<think>Look it up.</think>\n<search> first nobel prize physics </search>", False),
        ("<think>Röntgen.</think>\n<answer> Wilhelm Conrad Röntgen </answer>", True),
    ]
    result = feed(episode, outputs, retriever).result(GOLD)
    assert (result.reward, result.answer, result.stop_reason) == (1.0, GOLD[0], "answer")
    assert retriever.calls == [(["first nobel prize physics"], 2)]
    (context,) = result.contexts
    second = context.calls[1]
    assert second.messages == context.calls[0].messages  # one growing turn, same prompt
    assert second.assistant_prefix.startswith(outputs[0][0] + "\n\n<information>Doc 1(Title:")
    assert len(result.turn_contexts) == 2


def test_text_after_search_is_cut(retriever):
    episode = SearchR1Episode(QUESTION)
    request = episode.observe(ModelOutput("<search> q </search> and more<|x|>", True, (1, 2, 3)))
    assert request.query == "q"
    stored = episode.context.outputs[0]
    # The turn continues after </search>: no EOS, and the sampled ids no longer match the text.
    assert (stored.text, stored.eos, stored.token_ids) == ("<search> q </search>", False, None)


def test_invalid_action_gets_the_note_and_eos_without_answer_ends(retriever):
    outputs = [("I am not sure", False), ("<answer> Röntgen </answer>", True)]
    result = feed(SearchR1Episode(QUESTION), outputs, retriever).result(GOLD)
    assert result.contexts[0].calls[1].assistant_prefix == "I am not sure" + INVALID_ACTION
    assert result.reward == 0.0 and result.answer == "Röntgen"
    ended = feed(SearchR1Episode(QUESTION), [("It is Röntgen.", True)], retriever).result(GOLD)
    assert (ended.stop_reason, ended.answer, ended.reward) == ("no_answer", None, 0.0)


def test_turn_limit(retriever):
    outputs = [("<search> a </search>", False), ("<search> b </search>", False)]
    result = feed(SearchR1Episode(QUESTION, SearchR1Settings(max_turns=2)), outputs, retriever)
    result = result.result(GOLD)
    assert (result.stop_reason, result.reward) == ("turn_limit", 0.0)
    assert [q for q, _ in retriever.calls] == [["a"]]


def test_observations_are_cut_to_the_token_cap_as_search_r1s_max_obs_length():
    count = lambda text: len(text.split())  # noqa: E731  (a word counter stands in for tokens)
    assert cut_to_tokens("a b c d e f", 3, count) == "a b c "
    assert cut_to_tokens("a b", 3, count) == "a b"
    settings = SearchR1Settings(max_turns=5, top_k=2, max_observation_tokens=6)
    episode = SearchR1Episode(QUESTION, settings, count)
    request = episode.observe(ModelOutput("<think>x</think><search> nobel </search>", False))
    assert (request.query, request.k) == ("nobel", 2)
    long = passage("1", "T", " ".join(f"w{i}" for i in range(50)))
    episode.receive([long])
    prefix = episode.current_call().assistant_prefix
    observation = prefix.split("</search>", 1)[1]
    assert observation == format_information([long])[: len(observation)]
    assert count(observation) == 6
    with pytest.raises(ValueError, match="count_tokens"):
        SearchR1Episode(QUESTION, settings)
