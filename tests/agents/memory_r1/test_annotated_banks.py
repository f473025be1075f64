"""`construction.builder=raw_turns | observations | empty`: banks from the dialogue itself, from
LoCoMo's annotated observations or of nothing, with no model call (whole LoCoMo conversations on
a CPU; the no-memory floor)."""

import pytest

from memjax.agents.memory_r1 import bank_builders
from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.evaluation import method_name
from memjax.agents.memory_r1.observations import observation_bank
from memjax.agents.memory_r1.run_settings import DataSection, MemoryR1Run
from memjax.data.locomo import parse_locomo
from memjax.errors import ConfigError, DataError
from memjax.job_checks import check_job_config
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers


def _record(observation):
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I moved to Paris last week."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice! I adopted a cat named Tom."},
            ],
            "session_2_date_time": "2:00 pm on 9 June, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "I started painting and hiking."},
            ],
        },
        "qa": [
            {
                "question": "Where does Ann live?",
                "answer": "Paris",
                "evidence": ["D1:1"],
                "category": 4,
            }
        ],
        "observation": observation,
    }


OBSERVATIONS = {
    # Sessions out of order in the file: the bank follows the sessions.
    "session_2_observation": {
        "Ann": [["Ann started painting and hiking.", ["D2:1", "D1:1"]]],
    },
    "session_1_observation": {
        "Ann": [["Ann moved to Paris.", "D1:1"]],
        "Bo": [["Bo adopted a cat named Tom.", "D1:2"], ["  ", "D1:2"]],
    },
}


def _no_model(*args, **kwargs):
    raise AssertionError("an annotated bank called a model")


def test_observations_become_the_speakers_memories_dated_by_their_session():
    (conv,) = parse_locomo([_record(OBSERVATIONS)])
    bank = observation_bank(conv, helpers.BagOfWords())
    memories = sorted((e.owner, e.timestamp, e.text) for e in bank.entries())
    assert memories == [
        ("Ann", "1:56 pm on 8 May, 2023", "Ann moved to Paris."),
        ("Ann", "2:00 pm on 9 June, 2023", "Ann started painting and hiking."),
        ("Bo", "1:56 pm on 8 May, 2023", "Bo adopted a cat named Tom."),
    ]  # the blank observation is skipped
    # The op log names the first evidence turn, as a manager-built bank names its turn.
    turns = {r.op.text: r.provenance.source_turn for r in bank.log}
    assert turns["Ann started painting and hiking."] == "D2:1"
    assert turns["Bo adopted a cat named Tom."] == "D1:2"


@pytest.mark.parametrize(
    "observation, where",
    [
        ({"session_1_observation": {"Ann": [["a fact"]]}}, r"session_1_observation\.Ann\[0\]"),
        ({"session_1_observation": {"Ann": [["a fact", 3]]}}, r"evidence must be a dia_id"),
        ({"session_one": {"Ann": []}}, r"conv-x\.observation\.session_one"),
        ({"session_1_observation": {"Ann": "a fact"}}, r"session_1_observation\.Ann: expected"),
        ({}, r"conv-x: the conversation carries no observations"),
    ],
)
def test_a_malformed_observation_is_named_in_one_line(observation, where):
    (conv,) = parse_locomo([_record(observation)])
    with pytest.raises(DataError, match=where):
        observation_bank(conv, helpers.BagOfWords())


def _config(builder):
    config = memory_r1_config("scripted", locomo_path="synthetic")
    config.data.synthetic.num_train = 1
    config.data.synthetic.num_validation = 0
    config.data.synthetic.num_test = 1
    config.construction.builder = builder
    return config


def _test_bank(builder, banks_dir, monkeypatch):
    """(config, the one test conversation, stored banks) built by `builder`, no model allowed."""
    monkeypatch.setattr(S, "policy_for", _no_model)
    config = _config(builder)
    run = MemoryR1Run.from_config(config)
    conversations = S.select_conversations(S.load_conversations(run.data), run.data, "test")
    stored = bank_builders.conversation_banks(run, conversations, banks_dir, helpers.BagOfWords())
    (conv,) = conversations
    return config, conv, stored


def test_raw_turn_banks_hold_every_turn_and_call_no_model(tmp_path, monkeypatch):
    _, conv, stored = _test_bank("raw_turns", tmp_path, monkeypatch)
    bank = stored.banks[conv.sample_id]
    turns = conv.turns()
    assert len(bank) == len(turns) > 0
    assert stored.counters["raw_turns_memories"] == len(turns)
    said = {(t.speaker, s.date_time, t.display_text()) for s, t in turns}
    assert {(e.owner, e.timestamp, e.text) for e in bank.entries()} == said


def test_empty_banks_answer_every_question_from_nothing_and_call_no_model(tmp_path, monkeypatch):
    from memjax.agents.memory_r1.answer_env import answer_examples

    config, conv, stored = _test_bank("empty", tmp_path, monkeypatch)
    bank = stored.banks[conv.sample_id]
    assert len(bank) == 0 and not list(tmp_path.iterdir())  # nothing built, nothing cached
    items = S.questions(conv, DataSection.from_config(config.data))
    examples = answer_examples(conv.sample_id, conv.speakers, bank, items, 10)
    assert len(examples) == len(items) > 0
    assert all(not e.memories_a and not e.memories_b for e in examples)


def test_the_builders_are_named_in_reports_and_checked_at_the_boundary():
    config = _config("observations")
    config.answer.trained = "/ckpt/answer/policy"
    assert (
        method_name(MemoryR1Run.from_config(config)) == "/ckpt/answer/policy over observation banks"
    )
    config.construction.builder = "raw_turns"
    assert method_name(MemoryR1Run.from_config(config)) == "/ckpt/answer/policy over raw-turn banks"
    config.construction.builder = "empty"
    assert method_name(MemoryR1Run.from_config(config)) == "/ckpt/answer/policy over empty banks"
    config.job = "memory_r1.eval"
    config.construction.builder = "turns"
    with pytest.raises(ConfigError, match=r"expected one of policy, oracle, raw_turns"):
        check_job_config("memory_r1.eval", config)
