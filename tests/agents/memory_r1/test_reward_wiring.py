"""Manager reward wiring: cached temporal snapshots, ops applied, a scripted frozen answer agent.

Alice said she lives in Boston (session 1) and adopted Max; in session 2 she moved to Denver
and mentions Max again. The manager's reward is the frozen answer agent's exact match over
the bank after its ops: the right op earns 1, a harmful DELETE (or an ADD that leaves the
stale memory first in line) earns 0.
"""

import json

import pytest

from memjax.agents.memory_r1.answer_env import AnswerSettings
from memjax.agents.memory_r1.manager_env import ManagerEnvironment, ManagerSettings
from memjax.agents.memory_r1.snapshots import build_manager_examples, read_cached
from memjax.data.locomo import parse_locomo
from memjax.rl.environment import StepResult
from tests.agents.memory_r1 import helpers

CONVERSATION = {
    "sample_id": "toy-1",
    "conversation": {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Alice", "dia_id": "D1:1", "text": "I live in Boston now."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!"},
            {"speaker": "Alice", "dia_id": "D1:3", "text": "I adopted a dog named Max!"},
        ],
        "session_2_date_time": "2:00 pm on 3 June, 2023",
        "session_2": [
            {"speaker": "Alice", "dia_id": "D2:1", "text": "Big news: I moved to Denver!"},
            {"speaker": "Alice", "dia_id": "D2:2", "text": "Max loves the snow here."},
        ],
    },
    "qa": [
        {
            "question": "Where does Alice live?",
            "answer": "Denver",
            "evidence": ["D2:1"],
            "category": 1,
        },
        {
            "question": "What is the name of the dog?",
            "answer": "Max",
            "evidence": ["D2:2"],
            "category": 1,
        },
    ],
}


def teacher_facts(batch):
    """Every turn of three or more words is a fact."""
    out = []
    for messages in batch:
        turn = helpers.last_turn(messages)
        out.append(json.dumps({"facts": [turn.rstrip("!.")] if len(turn.split()) >= 3 else []}))
    return out


@pytest.fixture
def setup(tmp_path):
    conv = parse_locomo([CONVERSATION])
    calls = []

    def counting_facts(batch):
        calls.append(len(batch))
        return teacher_facts(batch)

    items = [(conv[0].sample_id, q) for q in conv[0].qa]
    build = lambda: build_manager_examples(
        conv, items, counting_facts, helpers.add_all_manager, helpers.BagOfWords(), tmp_path,
        teacher="scripted", window=24,
    )  # fmt: skip
    examples, stats = build()
    assert stats["snapshots_built"] == 2 and stats["examples"] == 2
    # Built once: a second build reads the cache and calls no teacher.
    n_calls = len(calls)
    again, stats2 = build()
    assert len(calls) == n_calls and stats2["snapshots_cached"] == 2 and again == examples
    env = ManagerEnvironment(
        helpers.ByteTokenizer(),
        helpers.BagOfWords(),
        helpers.keyword_answerer,
        ManagerSettings(answer=AnswerSettings(style="paper")),
    )
    return {e.question: e for e in examples}, env


def _memory_id(env, example, word):
    messages, _ = env.messages(example)
    return next(m["id"] for m in helpers.shown_memories(messages) if word in m["text"])


def _reward(env, example, items):
    state, prompt = env.reset(example)
    completion = env.tokenizer.encode(json.dumps({"memory": items}))
    _, result = env.step(state, completion, "eos")
    assert isinstance(result, StepResult) and result.done
    return result.reward, result.info


def test_snapshot_holds_only_the_preceding_turns(setup):
    examples, _ = setup
    snap, _, meta = read_cached(examples["Where does Alice live?"].snapshot)
    assert meta["window_turns"] == ["D1:1", "D1:2", "D1:3"]
    assert meta["facts"] == ["Big news: I moved to Denver"]
    assert sorted(e["text"] for e in snap.entries) == [
        "I adopted a dog named Max",
        "I live in Boston now",
    ]


def test_correct_update_earns_1_and_stale_add_earns_0(setup):
    examples, env = setup
    ex = examples["Where does Alice live?"]
    boston = _memory_id(env, ex, "Boston")
    update = {"id": boston, "text": "Alice lives in Denver", "event": "UPDATE"}
    assert _reward(env, ex, [update])[0] == 1.0
    # Adding the news but keeping "I live in Boston now" first in line answers Boston.
    add = {"id": "9", "text": "Big news: I moved to Denver", "event": "ADD"}
    reward, info = _reward(env, ex, [add])
    assert reward == 0.0 and info["add"] == 1.0


def test_harmful_delete_earns_0_and_no_change_earns_1(setup):
    examples, env = setup
    ex = examples["What is the name of the dog?"]
    max_id = _memory_id(env, ex, "Max")
    assert _reward(env, ex, [{"id": max_id, "text": "x", "event": "NONE"}])[0] == 1.0
    reward, info = _reward(env, ex, [{"id": max_id, "text": "x", "event": "DELETE"}])
    assert reward == 0.0 and info["delete"] == 1.0


def test_malformed_manager_output_is_a_zero_reward_for_its_ops_not_a_crash(setup):
    examples, env = setup
    ex = examples["What is the name of the dog?"]
    state, _ = env.reset(ex)
    _, result = env.step(
        state, env.tokenizer.encode('{"memory": [{"id": "77", "event": "DEL'), "length"
    )
    # Nothing applied: the snapshot still answers Max; the bad item is counted.
    assert result.reward == 1.0 and result.info["well_formed"] == 0.0
    assert result.info["truncated_completion"] == 1.0


def test_window_limits_the_snapshot_and_names_its_cache(tmp_path):
    conv = parse_locomo([CONVERSATION])
    items = [(conv[0].sample_id, conv[0].qa[0])]
    examples, _ = build_manager_examples(
        conv, items, teacher_facts, helpers.add_all_manager, helpers.BagOfWords(), tmp_path,
        teacher="scripted", window=1,
    )  # fmt: skip
    snap, _, meta = read_cached(examples[0].snapshot)
    assert meta["window_turns"] == ["D1:3"] and meta["window"] == 1
    assert [e["text"] for e in snap.entries] == ["I adopted a dog named Max"]
    assert "scripted-w1-c1" in examples[0].snapshot
