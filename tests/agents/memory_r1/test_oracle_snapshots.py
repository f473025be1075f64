"""`teacher.source=oracle` on synthetic data: the manager's training snapshots are built by the
generator's ground truth (each turn's true facts, the operations they call for), one
conversation at a time; on LoCoMo, which carries no fact tracks, it is refused in one line."""

import runpy
from pathlib import Path

import pytest

from memjax.agents.memory_r1 import job_setup as S
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.agents.memory_r1.training import _snapshot_teacher, manager_training_examples
from memjax.errors import ConfigError
from memjax.experiments.sources import synthetic_config
from memjax.experiments.synthetic_split import synthetic_split, synthetic_split_events
from memjax.experiments.teachers.synthetic_truth import event_facts

ROOT = Path(__file__).resolve().parents[3]


def _config():
    config = runpy.run_path(str(ROOT / "configs/memory_r1_synthetic_cpu.py"))["get_config"]()
    config.teacher.source = "oracle"
    config.teacher.name = "oracle"
    s = config.data.synthetic
    s.num_train, s.num_validation, s.num_test, s.sessions_per_conversation = 2, 1, 1, 2
    return config


def test_split_events_belong_to_the_split_conversations():
    cfg = synthetic_config(_config().data)
    parts = synthetic_split(cfg)
    events = synthetic_split_events(cfg)
    ids = {c.sample_id for part in parts.values() for c in part}
    assert set(events) == ids
    for part in parts.values():
        for conv in part:
            turns = {t.dia_id for s in conv.sessions for t in s.turns}
            assert {e.dia_id for e in events[conv.sample_id]} <= turns


def test_oracle_snapshots_carry_each_evidence_turns_true_facts(tmp_path):
    config = _config()
    run = MemoryR1Run.from_config(config)
    embedder = S.load_embedder(run.embedder)
    examples = manager_training_examples(run, tmp_path, "train", embedder)
    assert examples
    events = synthetic_split_events(synthetic_config(config.data))
    truth = {
        (conv_id, e.dia_id): tuple(event_facts(e)) for conv_id, es in events.items() for e in es
    }
    for example in examples:
        conv_id = example.uid.split("/")[0]
        assert example.facts == truth[(conv_id, example.turn.dia_id)], example.uid
    assert len({e.uid.split("/")[0] for e in examples}) == 2  # both training conversations


def test_an_oracle_on_locomo_is_refused_in_one_line(tmp_path):
    config = _config()
    config.data.path = "/nonexistent/locomo10.json"
    with pytest.raises(ConfigError, match=r"teacher.source='oracle': only synthetic data"):
        _snapshot_teacher(MemoryR1Run.from_config(config), [])
