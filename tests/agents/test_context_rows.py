"""Multi-context GRPO rows from a hand-built batch of MemSearcher trajectories with different
numbers of contexts: masks, trajectory indices, final flags, and the broadcast advantages."""

import numpy as np
import pytest

from memjax.agents.episode import ModelOutput
from memjax.agents.memsearcher import MemSearcherEpisode, MemSearcherSettings
from memjax.agents.retrieval import ScriptedRetriever, passage
from memjax.agents.samples import context_rows, pad_rows
from memjax.agents.transcript import ChatFormat
from memjax.rl.advantages import broadcast_to_contexts, group_advantages, token_advantages
from tests.agents.scripted import boxed, feed, memory, tool_call, word_count


def toy_format():
    """A character-level chat format: every character is one token (ord), EOS is 0."""

    def render(messages):
        return "".join(f"[{m['role']}]{m['content']}<e>" for m in messages) + "[assistant]"

    return ChatFormat(render=render, encode=lambda s: [ord(c) for c in s], eos_text="<e>", eos_id=0)


def trajectory(n_searches, answer):
    outputs = [x for i in range(n_searches) for x in (tool_call(f"q{i}"), memory(f"m{i}"))]
    episode = MemSearcherEpisode("Who?", word_count, MemSearcherSettings(max_turns=5))
    retriever = ScriptedRetriever(default=[passage("1", "T", "tool text")])
    return feed(episode, [*outputs, boxed(answer)], retriever).result(["Paris"])


def test_rows_masks_and_broadcast_advantages():
    fmt = toy_format()
    # Two questions x G = 2: 1, 3, 2 and 1 contexts; rewards 1.0, 0.1, 0.1 and 1.0.
    results = [
        trajectory(0, "Paris"),
        trajectory(2, "Rome"),
        trajectory(1, "Rome"),
        trajectory(0, "Paris"),
    ]
    assert [len(r.contexts) for r in results] == [1, 3, 2, 1]
    rows = context_rows(results, fmt)
    assert rows.context_trajectory.tolist() == [0, 1, 1, 1, 2, 2, 3]
    assert rows.final_mask.tolist() == [True, False, False, True, False, True, True]
    np.testing.assert_allclose(rows.rewards, [1.0, 0.1, 0.1, 1.0])

    # Only the model's characters are trained: a context with a search has two model spans.
    second = results[1].contexts[0]
    ids, mask = rows.token_ids[1], rows.loss_mask[1]
    trained = "".join(chr(t) if t else "<EOS>" for t, m in zip(ids, mask) if m)
    assert trained == f"{second.outputs[0].text}<EOS>{second.outputs[1].text}<EOS>"
    untrained = "".join(chr(t) for t, m in zip(ids, mask) if not m)
    assert "tool text" in untrained and "<tool_response>" in untrained

    padded = pad_rows(rows, pad_id=-1)
    b, t = padded["tokens"].shape
    assert b == 7 and t == max(len(r) for r in rows.token_ids)
    assert (padded["loss_mask"] <= padded["attention_mask"]).all()
    assert (padded["tokens"][padded["attention_mask"] == 0] == -1).all()

    # Group 1: rewards (1.0, 0.1): A = +-0.9 / (std 0.6364 + 1e-6) = +-0.7071; group 2 mirrors.
    adv = group_advantages(rows.rewards, group_size=2)
    expected = 0.9 / (np.std([1.0, 0.1], ddof=1) + 1e-6) / 2
    np.testing.assert_allclose(adv, [expected, -expected, -expected, expected], rtol=1e-5)
    per_row = broadcast_to_contexts(adv, rows.context_trajectory)
    np.testing.assert_allclose(per_row, [expected] + [-expected] * 5 + [expected], rtol=1e-5)
    per_token = np.asarray(token_advantages(per_row, padded["loss_mask"]))
    assert (per_token[padded["loss_mask"] == 0] == 0).all()
    np.testing.assert_allclose(per_token[1][padded["loss_mask"][1] == 1], -expected, rtol=1e-5)


def test_padding_never_cuts_a_context():
    rows = context_rows([trajectory(0, "Paris")], toy_format())
    with pytest.raises(ValueError, match="more than the padded length 10"):
        pad_rows(rows, pad_id=0, length=10)


def test_outputs_with_sampled_ids_keep_them():
    episode = MemSearcherEpisode("Who?", word_count)
    episode.observe(ModelOutput("x</think> \\boxed{Paris}", True, (5, 6, 7, 0)))
    rows = context_rows([episode.result(["Paris"])], toy_format())
    assert rows.token_ids[0][-4:] == [5, 6, 7, 0] and rows.loss_mask[0][-5:] == [0, 1, 1, 1, 1]


def test_search_agent_report(tmp_path):
    from memjax.agents.search_agent_report import EvaluatedEpisode, summarize, write

    episodes = [
        EvaluatedEpisode("memsearcher", "hotpotqa", ("Paris",), trajectory(2, "Paris")),
        EvaluatedEpisode("memsearcher", "hotpotqa", ("Paris",), trajectory(0, "Rome")),
        EvaluatedEpisode("memsearcher", "nq", ("Paris",), trajectory(1, "Paris")),
    ]
    report = summarize(episodes, toy_format())
    hotpot, nq, average = report.scores["memsearcher"]
    assert (hotpot.em, nq.em, average.em) == (0.5, 1.0, 0.75)
    assert [r.episodes for r in report.turns["memsearcher"]] == [3, 2, 1]
    paths = write(report, tmp_path)
    assert "| memsearcher | nq | 1 | 100.0 |" in paths["scores_markdown"].read_text()
    assert paths["plot"].exists()
    (b,) = report.behaviour  # 2 of 3 episodes searched (2 and 1 searches), all answered
    assert (b.episodes, b.answered, b.format_valid) == (3, 1.0, 1.0)
    assert abs(b.searched - 2 / 3) < 1e-9 and abs(b.searches_per_episode - 1.0) < 1e-9
    assert b.stop_reasons == {"answer@action": 3}  # every episode answered in an action call
    assert (
        "| memsearcher | 3 | 66.7% | 100.0% | 100.0% | 1.00 | answer@action 3 |"
        in paths["behaviour_markdown"].read_text()
    )
