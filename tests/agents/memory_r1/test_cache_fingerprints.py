"""Cached banks and temporal snapshots are reused only for the inputs that built them: a bank
built from another data file (or by another model) is rebuilt, saying what differed."""

import copy
import dataclasses
import json
import types

from memjax.agents.memory_r1 import evaluation
from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.bank_store import ensure_banks
from memjax.agents.memory_r1.construction import ConstructionSettings
from memjax.agents.memory_r1.policy import TimedPolicy
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.agents.memory_r1.snapshots import build_manager_examples
from memjax.data.locomo import load_locomo, parse_locomo
from memjax.experiments.synthetic import SyntheticConfig, write_synthetic_locomo
from memjax.recipes.memory_r1 import memory_r1_config
from tests.agents.memory_r1 import helpers
from tests.agents.memory_r1.test_reward_wiring import CONVERSATION, teacher_facts


def _memories(bank):
    return sorted(e.text for e in bank.entries())


def _eval_config(path):
    config = memory_r1_config("scripted", locomo_path=str(path))
    config.data.conversations = "syn-0"
    config.data.max_questions = 2
    return config


def test_eval_rebuilds_banks_built_from_another_data_file(tmp_path, monkeypatch, capsys):
    a = write_synthetic_locomo(tmp_path / "a.json", SyntheticConfig(num_conversations=1, seed=1))
    b = write_synthetic_locomo(tmp_path / "b.json", SyntheticConfig(num_conversations=1, seed=2))
    assert [c.sample_id for c in load_locomo(a)] == [c.sample_id for c in load_locomo(b)]
    roles = {
        "fact_extraction": helpers.fact_policy,
        "manager": helpers.add_all_manager,
        "answer": lambda batch: ["**Answer:** no idea"] * len(batch),
        "judge": lambda batch: ['{"label": "WRONG"}'] * len(batch),
    }
    monkeypatch.setattr(
        S, "policy_for", lambda run, role, n, b, name=None: TimedPolicy(roles[name or role])
    )
    monkeypatch.setattr(S, "load_embedder", lambda embedder: helpers.BagOfWords())
    tokenizer = types.SimpleNamespace(tokenizer=helpers.ByteTokenizer())
    monkeypatch.setattr(evaluation, "load_agent_model", lambda spec: tokenizer)
    workdir = tmp_path / "eval"

    evaluation.evaluate(MemoryR1Run.from_config(_eval_config(a)), workdir, method="scripted")
    assert "banks: built ['syn-0']" in capsys.readouterr().out
    evaluation.evaluate(MemoryR1Run.from_config(_eval_config(a)), workdir, method="scripted")
    assert "banks: built none" in capsys.readouterr().out  # same inputs: reused

    out = evaluation.evaluate(MemoryR1Run.from_config(_eval_config(b)), workdir, method="scripted")
    printed = capsys.readouterr().out
    assert "syn-0 was built from other inputs (conversation.sha256: " in printed
    assert "rebuilding" in printed and "banks: built ['syn-0']" in printed
    # The reports now rest on b's bank, the same as a fresh build from b gives.
    fresh = evaluation.evaluate(
        MemoryR1Run.from_config(_eval_config(b)), tmp_path / "fresh", method="scripted"
    )
    assert out["predictions"] == fresh["predictions"]
    build = json.loads((workdir / "banks" / "syn-0" / "build.json").read_text())
    assert build["fingerprint"]["manager.source"] == "scripted"


def test_a_bank_built_by_another_model_or_setting_is_rebuilt(tmp_path, capsys):
    conversations = parse_locomo([CONVERSATION])
    policies = TimedPolicy(helpers.fact_policy), TimedPolicy(helpers.add_all_manager)
    settings = ConstructionSettings()

    def ensure(inputs, settings=settings):
        return ensure_banks(
            conversations, *policies, helpers.BagOfWords(), settings, tmp_path, False, inputs
        )

    first = ensure({"manager.source": "model-a"})
    assert first.built == ["toy-1"]
    assert ensure({"manager.source": "model-a"}).built == []
    again = ensure({"manager.source": "model-b"})
    assert again.built == ["toy-1"]
    assert again.rebuilt == {"toy-1": ["manager.source: 'model-a' -> 'model-b'"]}
    assert "manager.source: 'model-a' -> 'model-b'); rebuilding" in capsys.readouterr().out
    other = ensure({"manager.source": "model-b"}, dataclasses.replace(settings, related_k=3))
    assert other.rebuilt == {"toy-1": ["construction.related_k: 10 -> 3"]}
    assert _memories(other.banks["toy-1"]) == _memories(first.banks["toy-1"])


def test_a_bank_saved_without_fingerprint_is_rebuilt(tmp_path):
    conversations = parse_locomo([CONVERSATION])
    policies = TimedPolicy(helpers.fact_policy), TimedPolicy(helpers.add_all_manager)
    args = (conversations, *policies, helpers.BagOfWords(), ConstructionSettings(), tmp_path)
    ensure_banks(*args, progress=False)
    build_file = tmp_path / "toy-1" / "build.json"
    build = json.loads(build_file.read_text())
    del build["fingerprint"]  # as an older memjax wrote it
    build_file.write_text(json.dumps(build))
    assert ensure_banks(*args, progress=False).rebuilt == {
        "toy-1": ["no fingerprint saved (built by an older memjax)"]
    }


def test_snapshots_built_from_another_conversation_text_are_rebuilt(tmp_path, capsys):
    def build(conversation, inputs=None):
        conv = parse_locomo([conversation])
        items = [(conv[0].sample_id, q) for q in conv[0].qa]
        return build_manager_examples(
            conv, items, teacher_facts, helpers.add_all_manager, helpers.BagOfWords(),
            tmp_path, teacher="scripted", window=24, inputs=inputs,
        )  # fmt: skip

    _, stats = build(CONVERSATION)
    assert stats["snapshots_built"] == 2
    assert build(CONVERSATION)[1]["snapshots_cached"] == 2
    edited = copy.deepcopy(CONVERSATION)
    edited["conversation"]["session_1"][0]["text"] = "I live in Chicago now."
    examples, stats = build(edited)
    assert stats["snapshots_rebuilt"] == 2 and stats["snapshots_cached"] == 0
    assert "snapshots: 2 in" in capsys.readouterr().out
    _, stats = build(edited, inputs={"teacher.source": "other"})
    assert stats["snapshots_rebuilt"] == 2


def test_a_damaged_snapshot_description_is_rebuilt_or_named(tmp_path, capsys):
    import pytest

    from memjax.agents.memory_r1.snapshots import read_cached
    from memjax.errors import DataFileError
    from memjax.memory.atomic import latest_snapshot

    conv = parse_locomo([CONVERSATION])
    items = [(conv[0].sample_id, q) for q in conv[0].qa]
    args = (conv, items, teacher_facts, helpers.add_all_manager, helpers.BagOfWords(), tmp_path)
    examples, _ = build_manager_examples(*args, teacher="scripted")
    turn_file = latest_snapshot(examples[0].snapshot) / "turn.json"
    turn_file.write_bytes(b"\xff not json")
    with pytest.raises(DataFileError, match="turn.json: unreadable snapshot description"):
        read_cached(examples[0].snapshot)
    _, stats = build_manager_examples(*args, teacher="scripted")
    assert stats["snapshots_rebuilt"] == 1 and "unreadable turn.json" in capsys.readouterr().out


def test_a_separate_fact_extractor_builds_the_facts_and_keys_the_bank(tmp_path, monkeypatch):
    path = write_synthetic_locomo(tmp_path / "a.json", SyntheticConfig(num_conversations=1))
    asked = []

    def policy_for(run, role, n, b, name=None):
        asked.append((name, role, run.model(role).trained))
        scripted = {"fact_extraction": helpers.fact_policy, "manager": helpers.add_all_manager}
        return TimedPolicy(scripted[name])

    monkeypatch.setattr(S, "policy_for", policy_for)
    config = _eval_config(path)
    config.manager.trained = "/ckpt/manager/policy"
    S.fact_and_manager_policies(MemoryR1Run.from_config(config))
    assert asked == [
        ("fact_extraction", "manager", "/ckpt/manager/policy"),  # default: the manager's model
        ("manager", "manager", "/ckpt/manager/policy"),
    ]
    assert not any(
        key.startswith("facts.") for key in S.bank_inputs(MemoryR1Run.from_config(config))
    )

    asked.clear()
    config.facts.trained = "/ckpt/sft/policy"
    run = MemoryR1Run.from_config(config)
    S.fact_and_manager_policies(run)
    assert asked == [
        ("fact_extraction", "facts", "/ckpt/sft/policy"),
        ("manager", "manager", "/ckpt/manager/policy"),
    ]
    inputs = S.bank_inputs(run)
    assert inputs["facts.trained"] == "/ckpt/sft/policy"  # another extractor: another bank
    assert inputs["manager.trained"] == "/ckpt/manager/policy"
    assert "facts.trained" not in S.bank_inputs(run, role="teacher")  # snapshots: teacher's
