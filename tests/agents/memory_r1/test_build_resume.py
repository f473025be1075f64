"""Model-built banks lose nothing to a stop and extract facts once per extractor: a stopped
construction resumes from its last checkpoint and ends as a build that never stopped, and a
second manager over the same extractor reads the first one's facts."""

import json

import pytest

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.bank_store import ensure_banks
from memjax.agents.memory_r1.construction import ConstructionSettings
from memjax.agents.memory_r1.fact_cache import FactCache
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.experiments.synthetic import SyntheticConfig, generate_conversations
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers


class Stopped(Exception):
    """The process was stopped (a kill, a preemption) during a manager call."""


def _conversations():
    return generate_conversations(SyntheticConfig(num_conversations=2, seed=5))


def _bank_state(bank):
    """Everything a bank holds, ids and op log included (numbering must continue exactly)."""
    entries = [(e.id, e.text, e.owner, e.timestamp) for e in bank.entries()]
    log = [(r.step, r.op.kind, r.id, r.provenance.source_turn) for r in bank.log]
    return entries, log


def _counting(policy, calls):
    def counted(batch):
        calls.append(len(batch))
        return policy(batch)

    return counted


def _stopping_after(policy, calls, limit):
    def stopping(batch):
        if len(calls) == limit:
            raise Stopped
        calls.append(len(batch))
        return policy(batch)

    return stopping


def _ensure(root, facts, manager, *, fact_cache=None, every=2, inputs=None):
    return ensure_banks(
        _conversations(),
        TimedPolicy(facts, "fact_extraction"),
        TimedPolicy(manager, "manager"),
        helpers.BagOfWords(),
        ConstructionSettings(),
        root,
        False,
        inputs or {"manager.source": "scripted"},
        fact_cache=fact_cache,
        checkpoint_every=every,
    )


def test_a_stopped_construction_resumes_and_ends_as_an_unstopped_one(tmp_path, capsys):
    straight_calls: list[int] = []
    straight = _ensure(
        tmp_path / "straight",
        helpers.fact_policy,
        _counting(helpers.add_all_manager, straight_calls),
    )
    assert len(straight_calls) > 6  # enough steps to stop part-way

    root = tmp_path / "stopped"
    first: list[int] = []
    with pytest.raises(Stopped):
        _ensure(root, helpers.fact_policy, _stopping_after(helpers.add_all_manager, first, 5))
    assert len(first) == 5 and (root / ".building").is_dir()
    assert not (root / _conversations()[0].sample_id / "build.json").exists()

    fact_calls: list[int] = []
    second: list[int] = []
    resumed = _ensure(
        root, _counting(helpers.fact_policy, fact_calls), _counting(helpers.add_all_manager, second)
    )
    printed = capsys.readouterr().out
    # Saved after steps 2 and 4 (every=2): steps 5 on are run again, and nothing before.
    assert "after manager step 4" in printed
    assert second == straight_calls[4:]
    assert fact_calls == []  # the facts came back with the saved traces
    for conv in _conversations():
        cid = conv.sample_id
        assert _bank_state(resumed.banks[cid]) == _bank_state(straight.banks[cid])
        trace = (root / cid / "trace.jsonl").read_text()
        assert trace == (tmp_path / "straight" / cid / "trace.jsonl").read_text()
    assert resumed.counters == straight.counters
    # Every manager call's latency is reported, those before the stop included (steps 1-4).
    assert len(resumed.latency["manager"]) == sum(straight_calls)
    assert not (root / ".building").exists()  # the saves go once the banks are written


def test_a_damaged_checkpoint_is_named_and_the_build_starts_over(tmp_path, capsys):
    root = tmp_path / "banks"
    with pytest.raises(Stopped):
        _ensure(root, helpers.fact_policy, _stopping_after(helpers.add_all_manager, [], 3))
    (progress,) = root.glob(".building/*/snapshot-*/progress.json")
    progress.write_text("{not json")
    calls: list[int] = []
    built = _ensure(root, helpers.fact_policy, _counting(helpers.add_all_manager, calls))
    printed = capsys.readouterr().out
    assert "cannot be resumed" in printed and str(progress.parent) in printed
    straight = _ensure(tmp_path / "straight", helpers.fact_policy, helpers.add_all_manager)
    assert sum(calls) == len(straight.latency["manager"])  # every step run again
    cid = _conversations()[0].sample_id
    assert _bank_state(built.banks[cid]) == _bank_state(straight.banks[cid])


def test_a_second_manager_over_the_same_extractor_reads_its_facts(tmp_path, capsys):
    cache = FactCache(tmp_path / "facts", {"extractor.source": "sft"})
    fact_calls: list[int] = []
    facts = _counting(helpers.fact_policy, fact_calls)
    sft = _ensure(tmp_path / "sft", facts, helpers.add_all_manager, fact_cache=cache)
    extracted = len(fact_calls)
    assert extracted > 0

    def keep_nothing(batch):  # another manager: writes no memory
        return [json.dumps({"memory": []})] * len(batch)

    rl = _ensure(
        tmp_path / "rl", facts, keep_nothing, fact_cache=cache, inputs={"manager.trained": "rl"}
    )
    assert len(fact_calls) == extracted  # no second extraction
    cid = _conversations()[0].sample_id
    assert len(sft.banks[cid]) > 0 and len(rl.banks[cid]) == 0  # each manager's own banks
    assert rl.counters["facts_total"] == sft.counters["facts_total"] > 0
    assert rl.latency["fact_extraction"] == sft.latency["fact_extraction"]
    rl_trace = (tmp_path / "rl" / cid / "trace.jsonl").read_text().splitlines()
    sft_trace = (tmp_path / "sft" / cid / "trace.jsonl").read_text().splitlines()
    assert [json.loads(t)["facts"] for t in rl_trace] == [json.loads(t)["facts"] for t in sft_trace]

    # Another extractor's facts are its own; a damaged file is named and extracted again.
    other = FactCache(tmp_path / "facts", {"extractor.source": "base"})
    _ensure(tmp_path / "base", facts, helpers.add_all_manager, fact_cache=other, inputs={"m": 1})
    assert len(fact_calls) > extracted
    saved = cache.path(_conversations()[0], ConstructionSettings())
    saved.write_text('{"outputs": ["cut')
    capsys.readouterr()
    n = len(fact_calls)
    _ensure(tmp_path / "again", facts, helpers.add_all_manager, fact_cache=cache, inputs={"m": 2})
    assert len(fact_calls) > n
    assert f"facts: {saved} is unreadable" in capsys.readouterr().out


def test_the_sft_model_is_one_extractor_as_the_managers_own_and_as_a_separate_one():
    sft = memory_r1_config("packaged:smollm2")
    sft.model.source = "/ckpt/sft/policy"
    rl = memory_r1_config("packaged:smollm2")
    rl.model.source = "/ckpt/sft/policy"
    rl.manager.trained = "/ckpt/rl_manager/policy"
    rl.facts.source = "/ckpt/sft/policy"
    run = MemoryR1Run.from_config
    assert run(sft).fact_role == "manager" and run(rl).fact_role == "facts"
    assert S.fact_inputs(run(sft)) == S.fact_inputs(run(rl))
    assert S.bank_inputs(run(sft)) != S.bank_inputs(run(rl))
    rl.construction.fact_max_new_tokens = 32  # other generation settings: other facts
    assert S.fact_inputs(run(sft)) != S.fact_inputs(run(rl))
