"""The scripted Memory-R1 teachers earn the full reward when replayed through memjax's own
construction path, parsers and answer reward; corrupted trajectories are rejected and counted."""

import copy
import json
from collections import Counter

from memjax.agents.memory_r1.manager_parser import parse_manager_output
from memjax.experiments.synthetic import SyntheticConfig, write_synthetic_locomo
from memjax.experiments.teachers import memory_roles as R
from memjax.experiments.teachers.memory_world import MemoryWorld, locomo_source
from memjax.experiments.teachers.trajectory import read_trajectories, write_trajectories
from memjax.experiments.teachers.verdict import RejectionTally, keep_full_reward
from tests.agents.memory_r1.helpers import BagOfWords
from tests.experiments.teachers.fixtures import memory_world


def _keep(world, role, trajectories):
    replay = {"facts": R.replay_facts, "manager": R.replay_manager, "answer": R.replay_answer}
    tally = RejectionTally()
    kept = keep_full_reward(trajectories, lambda t: replay[role](world, t), tally)
    return kept, tally.as_dict()[role]


def test_oracle_trajectories_earn_full_reward_and_use_every_operation(tmp_path):
    world, source, convs = memory_world()
    for role, make in (
        ("facts", R.fact_trajectories),
        ("manager", R.manager_trajectories),
        ("answer", R.answer_trajectories),
    ):
        trajectories = make(world, source, convs, "synthetic:train_seed7")
        # Written and read back as the SFT loader will, then replayed from the file.
        write_trajectories(tmp_path / f"{role}.jsonl", trajectories)
        kept, tally = _keep(world, role, read_trajectories(tmp_path / f"{role}.jsonl"))
        assert tally["offered"] == len(trajectories) > 0
        assert tally["kept"] == tally["offered"], tally["reject_reasons"]
        assert all(t.reward == 1.0 and t.split == "synthetic:train_seed7" for t in kept)
    # The manager's rows call for every operation the synthetic tracks need.
    events = Counter()
    for t in R.manager_trajectories(world, source, convs, "train"):
        for context in t.contexts:
            for item in json.loads(context[-1]["content"])["memory"]:
                events[item["event"]] += 1
    assert all(events[e] > 0 for e in ("ADD", "UPDATE", "DELETE", "NONE")), events


def test_answer_oracle_selects_the_evidence_memories():
    world, source, convs = memory_world(conversations=1)
    for t in R.answer_trajectories(world, source, convs, "train"):
        text = t.contexts[0][-1]["content"]
        gold = next(q.answer for q in convs[0].qa if q.index == t.source["qa_index"])
        assert text.endswith(f"**Answer:** {gold}")
        assert text.count("\n- ") >= 1  # at least one distilled memory before the answer


def _first_with(trajectory, event):
    for c, context in enumerate(trajectory.contexts):
        if f'"event": "{event}"' in context[-1]["content"]:
            return c
    raise AssertionError(f"no {event} in {trajectory.id}")


def test_corrupted_manager_trajectories_are_rejected_with_their_reason():
    world, source, convs = memory_world(conversations=2)
    good = R.manager_trajectories(world, source, convs, "train")
    bad = []
    # An UPDATE turned into an ADD leaves the replaced value in the bank.
    t = copy.deepcopy(good[0])
    c = _first_with(t, "UPDATE")
    items = json.loads(t.contexts[c][-1]["content"])["memory"]
    for item in items:
        if item["event"] == "UPDATE":
            item["event"], item["id"] = "ADD", str(len(items))
    t.contexts[c][-1]["content"] = json.dumps({"memory": items})
    bad.append(t)
    # Output the parser rejects (an id the manager was never shown).
    t = copy.deepcopy(good[1])
    c = _first_with(t, "DELETE") if '"DELETE"' in json.dumps(t.contexts) else 0
    t.contexts[c][-1]["content"] = '{"memory": [{"id": "99", "text": "x", "event": "DELETE"}]}'
    bad.append(t)
    # A prompt that is not the one the construction shows.
    t = copy.deepcopy(good[0])
    t.contexts[0][0]["content"] += " "
    bad.append(t)
    tally = RejectionTally()
    kept = keep_full_reward(good + bad, lambda t: R.replay_manager(world, t), tally)
    summary = tally.as_dict()["manager"]
    assert len(kept) == len(good) and summary["offered"] == len(good) + 3
    reasons = summary["reject_reasons"]
    assert reasons.get("prompt_mismatch") == 1
    assert reasons.get("manager_output_rejected") == 1
    assert sum(n for r, n in reasons.items() if r.startswith("stale_")) == 1, reasons


def test_corrupted_fact_and_answer_trajectories_are_rejected():
    world, source, convs = memory_world(conversations=1)
    facts = R.fact_trajectories(world, source, convs, "train")
    small_talk = next(t for t in facts if t.contexts[0][-1]["content"] == '{"facts": []}')
    news = next(t for t in facts if t.contexts[0][-1]["content"] != '{"facts": []}')
    chatty, wrong = copy.deepcopy(small_talk), copy.deepcopy(news)
    chatty.contexts[0][-1]["content"] = '{"facts": ["Likes the weather"]}'
    wrong.contexts[0][-1]["content"] = '{"facts": ["Has news"]}'
    assert R.replay_facts(world, chatty).reason == "facts_on_small_talk"
    assert R.replay_facts(world, wrong).reason == "fact_misses_a_value"

    answers = R.answer_trajectories(world, source, convs, "train")
    no_marker, wrong_answer, invented = (copy.deepcopy(answers[0]) for _ in range(3))
    text = answers[0].contexts[0][-1]["content"]
    no_marker.contexts[0][-1]["content"] = text.replace("**Answer:**", "Answer:")
    wrong_answer.contexts[0][-1]["content"] = text.rsplit("**Answer:**", 1)[0] + "**Answer:** 42"
    invented.contexts[0][-1]["content"] = "- 1 May: made up\n" + text
    assert R.replay_answer(world, no_marker).reason == "no_answer_marker"
    assert R.replay_answer(world, wrong_answer).reason == "answer_not_exact"
    assert R.replay_answer(world, invented).reason == "selected_memory_not_shown"


def test_manager_oracle_ops_are_the_parsers_well_formed_ops():
    world, source, convs = memory_world(conversations=1)
    (t,) = R.manager_trajectories(world, source, convs, "train")
    from memjax.agents.memory_r1.id_map import IdMap
    from memjax.experiments.teachers.memory_oracles import read_manager_prompt

    for context in t.contexts:
        shown, _ = read_manager_prompt(context[0]["content"])
        ids = IdMap.from_memories([(str(i), m["text"]) for i, m in enumerate(shown)])
        assert parse_manager_output(context[-1]["content"], ids).well_formed


def test_answer_teacher_on_a_locomo_file_over_raw_turn_banks(tmp_path):
    """LoCoMo's layout (a file on disk, no fact tracks): every turn is a memory dated by its
    session, and the evidence turns are the distilled selection."""
    path = write_synthetic_locomo(tmp_path / "locomo.json", SyntheticConfig(2, seed=11))
    world = MemoryWorld(BagOfWords())
    source = locomo_source(path)
    convs = list(world.conversations(source).values())
    trajectories = R.answer_trajectories(world, source, convs, "locomo:test_file")
    kept, tally = _keep(world, "answer", trajectories)
    # Questions whose evidence turn was not retrieved are rejected, not guessed.
    assert tally["kept"] + sum(tally["reject_reasons"].values()) == tally["offered"]
    assert set(tally["reject_reasons"]) <= {"no_evidence_selected"}
    assert tally["kept"] >= 0.8 * tally["offered"], tally


def test_answer_teacher_on_conv26(shared_data):
    world = MemoryWorld(BagOfWords())
    source = locomo_source(shared_data / "locomo10.json")
    conv = world.conversations(source)["conv-26"]
    trajectories = R.answer_trajectories(world, source, [conv], "locomo:memory_r1_train")
    kept, tally = _keep(world, "answer", trajectories)
    assert tally["offered"] == 152  # conv-26's questions without category 5 (Memory-R1)
    assert set(tally["reject_reasons"]) <= {"no_evidence_selected", "answer_not_exact"}
    assert tally["kept"] > 0 and all(t.reward == 1.0 for t in kept)
