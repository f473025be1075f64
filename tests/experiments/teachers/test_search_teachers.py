"""The scripted MemSearcher and Search-R1 teachers earn the full reward when replayed through
the real episodes and retriever; corrupted trajectories are rejected and counted."""

import copy

from memjax.experiments.teachers import search_roles as S
from memjax.experiments.teachers.trajectory import read_trajectories, write_trajectories
from memjax.experiments.teachers.verdict import RejectionTally, keep_full_reward
from tests.experiments.teachers.fixtures import search_world

REPLAY = {"memsearcher": S.replay_memsearcher, "search_r1": S.replay_search_r1}


def _replay_all(world, trajectories):
    tally = RejectionTally()
    kept = keep_full_reward(trajectories, lambda t: REPLAY[t.role](world, t), tally)
    return kept, tally.as_dict()


def test_oracles_earn_full_reward_through_the_real_episodes(tmp_path):
    world, examples = search_world(tmp_path)
    for agent in S.AGENTS:
        trajectories = S.search_trajectories(world, agent, examples, "hotpotqa:test_file")
        write_trajectories(tmp_path / f"{agent}.jsonl", trajectories)
        kept, tally = _replay_all(world, read_trajectories(tmp_path / f"{agent}.jsonl"))
        assert tally[agent]["kept"] == len(examples), tally
        assert all(t.reward == 1.0 for t in kept)


def test_memsearcher_contexts_are_rebuilt_from_question_and_memory(tmp_path):
    world, examples = search_world(tmp_path)
    (t,) = S.search_trajectories(world, "memsearcher", examples[:1], "train")
    # Two supporting paragraphs: two search turns, then the answer turn.
    assert len(t.contexts) == 3
    first, second, last = t.contexts
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user", "assistant"]
    assert first[2]["content"].startswith("<think>") and "<tool_call>" in first[2]["content"]
    assert first[1]["content"].endswith("<memory>  </memory>")
    # The next context starts from the memory the previous one wrote: the supporting sentence.
    assert "Moon Harbor: Moon Harbor is a novel by Ana Sousa." in second[1]["content"]
    assert "Ana Sousa was born in Lisbon." in last[1]["content"]
    assert [m["role"] for m in last] == ["system", "user", "assistant"]
    assert last[-1]["content"].endswith("\\boxed{Lisbon}")


def test_each_thought_lists_what_was_found_before_it_decides(tmp_path):
    world, examples = search_world(tmp_path)
    (t,) = S.search_trajectories(world, "memsearcher", examples[:1], "train")
    thoughts = [context[2]["content"].split("</think>")[0] for context in t.contexts]
    assert thoughts == [
        "<think>Found so far: nothing yet. I still need Moon Harbor.",
        "<think>Found so far: Moon Harbor. I still need Ana Sousa.",
        "<think>Found so far: Moon Harbor; Ana Sousa. That is all the question needs.",
    ]
    (r1,) = S.search_trajectories(world, "search_r1", examples[:1], "train")
    turns = [m["content"] for m in r1.contexts[0][1:] if m.get("train") is not False]
    assert turns[-1].startswith("<think> Found so far: Moon Harbor; Ana Sousa. That is all")


def test_search_r1_information_is_not_trained(tmp_path):
    world, examples = search_world(tmp_path)
    (t,) = S.search_trajectories(world, "search_r1", examples[:1], "train")
    (context,) = t.contexts
    assert context[0]["role"] == "user"
    turn = context[1:]
    assert all(m["role"] == "assistant" for m in turn)
    untrained = [m for m in turn if m.get("train") is False]
    assert len(untrained) == 2 and all("<information>" in m["content"] for m in untrained)
    assert turn[-1]["content"].endswith("<answer> Lisbon </answer>")


def test_corrupted_search_trajectories_are_rejected_with_their_reason(tmp_path):
    world, examples = search_world(tmp_path)
    ms = S.search_trajectories(world, "memsearcher", examples, "train")
    sr = S.search_trajectories(world, "search_r1", examples, "train")
    wrong, passage, short = (copy.deepcopy(ms[0]) for _ in range(3))
    wrong.contexts[-1][-1]["content"] = wrong.contexts[-1][-1]["content"].replace(
        "\\boxed{Lisbon}", "\\boxed{Porto}"
    )
    response = passage.contexts[0][3]["content"]
    assert "a novel by" in response  # a retrieved passage the replay must see again
    passage.contexts[0][3]["content"] = response.replace("a novel by", "a poem by")
    short.contexts = short.contexts[:-1]  # the answer turn is missing
    r1_wrong, r1_info = copy.deepcopy(sr[1]), copy.deepcopy(sr[1])
    r1_wrong.contexts[0][-1]["content"] = "<think> done </think>\n<answer> Otto Vail </answer>"
    r1_info.contexts[0][2]["content"] = "\n\n<information>made up</information>\n\n"
    kept, tally = _replay_all(world, ms + sr + [wrong, passage, short, r1_wrong, r1_info])
    assert len(kept) == len(ms) + len(sr)
    assert tally["memsearcher"]["reject_reasons"] == {
        "answer_not_exact": 1,
        "prompt_mismatch": 1,
        "trajectory_too_short": 1,
    }
    assert tally["search_r1"]["reject_reasons"] == {"answer_not_exact": 1, "prompt_mismatch": 1}


def test_an_oracle_that_runs_out_of_turns_is_rejected(tmp_path):
    import dataclasses

    world, examples = search_world(tmp_path)
    world.memsearcher = dataclasses.replace(world.memsearcher, max_turns=2)
    trajectories = S.search_trajectories(world, "memsearcher", examples, "train")
    kept, tally = _replay_all(world, trajectories)
    # Two supporting paragraphs need two search turns and an answer turn: never within 2.
    assert not kept
    assert tally["memsearcher"]["reject_reasons"] == {"stopped_turn_limit": len(examples)}


def test_a_completion_longer_than_one_call_may_write_is_rejected(tmp_path):
    world, examples = search_world(tmp_path)

    def trajectories():  # the budget is a setting the trajectories carry
        return [t for a in S.AGENTS for t in S.search_trajectories(world, a, examples, "train")]

    # The fixture counts words; the longest completion, plus its EOS, must fit.
    longest = max(
        len(m["content"].split())
        for t in trajectories()
        for c in t.contexts
        for m in c
        if m["role"] == "assistant" and m.get("train") is not False
    )
    world.max_call_tokens = longest + 1
    everything = trajectories()
    kept, _ = _replay_all(world, everything)
    assert len(kept) == len(everything)
    world.max_call_tokens = longest  # the longest no longer fits with its EOS
    kept, tally = _replay_all(world, trajectories())
    reasons = {**tally["memsearcher"]["reject_reasons"], **tally["search_r1"]["reject_reasons"]}
    assert len(kept) < len(everything) and set(reasons) == {"call_over_budget"}
