"""`construction.builder=oracle`: the synthetic ground truth builds the banks (the bank a
perfect extractor and manager keep), with no model call, cached and keyed by who built it."""

from collections import Counter

import pytest

from memjax.agents.memory_r1 import bank_builders
from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.errors import ConfigError
from memjax.experiments.teachers.synthetic_truth import bank_errors, final_states
from memjax.job_checks import check_job_config
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers


def _config(builder="oracle"):
    config = memory_r1_config("scripted", locomo_path="synthetic")
    config.data.synthetic.num_train = 2
    config.data.synthetic.num_validation = 1
    config.data.synthetic.num_test = 1
    config.construction.builder = builder
    return config


def _no_model(*args, **kwargs):
    raise AssertionError("an oracle-built bank called a model")


def test_oracle_banks_hold_every_current_value_and_no_stale_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(S, "policy_for", _no_model)
    config = _config()
    run = MemoryR1Run.from_config(config)
    conversations = S.select_conversations(S.load_conversations(run.data), run.data, "train")
    stored = bank_builders.conversation_banks(run, conversations, tmp_path, helpers.BagOfWords())

    events = bank_builders.oracle_events(run.data)
    assert sorted(stored.banks) == sorted(c.sample_id for c in conversations) and stored.built
    for conv in conversations:
        states = final_states(events[conv.sample_id])
        assert states, conv.sample_id  # the check below is not vacuous
        assert bank_errors(stored.banks[conv.sample_id], states) == []
    # Updates and deletions happened, not only additions.
    assert stored.counters["manager_op_update"] > 0 and stored.counters["manager_op_add"] > 0
    # The run's counters are the sum of each conversation's own build.
    alone = [
        bank_builders.conversation_banks(run, [c], tmp_path / c.sample_id, helpers.BagOfWords())
        for c in conversations
    ]
    assert stored.counters == sum((one.counters for one in alone), Counter())

    again = bank_builders.conversation_banks(run, conversations, tmp_path, helpers.BagOfWords())
    assert again.built == []  # cached
    for cid, bank in stored.banks.items():
        assert sorted(e.text for e in again.banks[cid].entries()) == sorted(
            e.text for e in bank.entries()
        )


def test_a_policy_built_bank_is_not_taken_for_an_oracle_one(tmp_path, monkeypatch, capsys):
    roles = {"fact_extraction": helpers.fact_policy, "manager": helpers.add_all_manager}
    monkeypatch.setattr(
        S,
        "policy_for",
        lambda run, role, n, b, name=None: bank_builders.TimedPolicy(roles[name or role]),
    )
    run = MemoryR1Run.from_config(_config("policy"))
    conversations = S.select_conversations(S.load_conversations(run.data), run.data, "test")
    added = bank_builders.conversation_banks(run, conversations, tmp_path, helpers.BagOfWords())
    oracle_run = MemoryR1Run.from_config(_config())
    states = final_states(bank_builders.oracle_events(oracle_run.data)[conversations[0].sample_id])
    assert bank_errors(added.banks[conversations[0].sample_id], states)  # the check can fail
    capsys.readouterr()
    oracle = bank_builders.conversation_banks(
        oracle_run, conversations, tmp_path, helpers.BagOfWords()
    )
    assert oracle.built == [conversations[0].sample_id]
    assert "construction.builder" in capsys.readouterr().out  # says what differed


def test_the_oracle_builder_is_refused_off_synthetic_data_in_one_line():
    config = memory_r1_config("scripted", locomo_path="/data/locomo10.json")
    config.job = "memory_r1.eval"
    config.construction.builder = "oracle"
    with pytest.raises(ConfigError, match=r"config.construction.builder='oracle': only synthetic"):
        check_job_config("memory_r1.eval", config)
    config.construction.builder = "gpt"
    with pytest.raises(ConfigError, match=r"expected one of policy, oracle"):
        check_job_config("memory_r1.eval", config)


def test_the_report_names_the_trained_answer_agent_and_who_built_the_banks():
    from memjax.agents.memory_r1.evaluation import method_name

    config = _config("policy")
    assert method_name(MemoryR1Run.from_config(config)) == "scripted"
    config.answer.trained = "/ckpt/answer/policy"
    assert (
        method_name(MemoryR1Run.from_config(config)) == "/ckpt/answer/policy over scripted's banks"
    )
    config.construction.builder = "oracle"
    assert method_name(MemoryR1Run.from_config(config)) == "/ckpt/answer/policy over oracle banks"
