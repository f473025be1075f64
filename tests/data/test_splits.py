"""Splits that never overlap and are the same every time: Memory-R1's LoCoMo conversations,
synthetic conversations from separate seeds, and the shared HotpotQA sample cut by id; and
the split line every report carries."""

import random
import runpy

import pytest

from memjax.agents.memory_r1 import job_setup as mr1
from memjax.agents.memory_r1.run_settings import DataSection
from memjax.agents.memsearcher import job_setup as ms
from memjax.data.corpus import build_corpus, hotpot_paragraphs, read_corpus
from memjax.data.hotpotqa import load_hotpotqa
from memjax.data.splits import held_out_ids
from memjax.experiments.synthetic_split import SyntheticSplitConfig, synthetic_split
from memjax.recipes.memory_r1 import memory_r1_config

CPU_CONFIG = ms.REPO_ROOT / "configs" / "memsearcher_cpu.py"


def dialogue(conversation):
    return tuple((t.speaker, t.text) for s in conversation.sessions for t in s.turns)


def test_synthetic_parts_come_from_separate_seeds_and_never_overlap():
    cfg = SyntheticSplitConfig(num_train=5, num_validation=2, num_test=4)
    parts = synthetic_split(cfg)
    assert {k: len(v) for k, v in parts.items()} == {"train": 5, "validation": 2, "test": 4}
    ids = {k: {c.sample_id for c in v} for k, v in parts.items()}
    assert not ids["train"] & ids["validation"] and not ids["train"] & ids["test"]
    assert not ids["validation"] & ids["test"]
    train_dialogues = {dialogue(c) for c in parts["train"]}
    assert not train_dialogues & {dialogue(c) for c in parts["validation"] + parts["test"]}
    again = synthetic_split(cfg)
    assert [dialogue(c) for c in again["test"]] == [dialogue(c) for c in parts["test"]]
    with pytest.raises(ValueError, match="both 3"):
        SyntheticSplitConfig(train_seed=3, held_out_seed=3)


def test_memory_r1_jobs_select_the_synthetic_parts():
    data = DataSection.from_config(memory_r1_config("unused", locomo_path="synthetic").data)
    conversations = mr1.load_conversations(data)
    chosen = {
        split: [c.sample_id for c in mr1.select_conversations(conversations, data, split)]
        for split in ("train", "validation", "test")
    }
    assert chosen == {
        "train": [f"syn-train-{i}" for i in range(4)],
        "validation": ["syn-heldout-0"],
        "test": ["syn-heldout-1", "syn-heldout-2", "syn-heldout-3"],
    }
    summary = mr1.split_summary(conversations, data)
    counts = {
        p: sum(len(mr1.questions(c, data)) for c in conversations if c.sample_id in ids)
        for p, ids in chosen.items()
    }
    assert summary.name == "test" and summary.sizes == {**counts, "scored": counts["test"]}
    assert "held-out seed 1" in summary.line() and summary.line().startswith("Split: test (")


def test_memory_r1_locomo_split_sizes_in_the_report(shared_data):
    data = DataSection.from_config(
        memory_r1_config("unused", locomo_path=str(shared_data / "locomo10.json")).data
    )
    summary = mr1.split_summary(mr1.load_conversations(data), data)
    assert summary.sizes == {"train": 152, "validation": 81, "test": 1307, "scored": 1307}


def test_held_out_ids_depend_only_on_ids_and_seed():
    ids = [f"q{i}" for i in range(50)]
    chosen = held_out_ids(ids, 0.2, seed=0)
    assert len(chosen) == 10 and chosen <= set(ids)
    shuffled = ids[:]
    random.Random(4).shuffle(shuffled)
    assert held_out_ids(shuffled, 0.2, seed=0) == chosen
    assert held_out_ids(ids, 0.2, seed=1) != chosen
    with pytest.raises(ValueError, match="duplicate"):
        held_out_ids(ids + ["q0"], 0.2, 0)
    with pytest.raises(ValueError, match="both parts"):
        held_out_ids(ids[:2], 0.2, 0)


def test_memsearcher_cpu_config_trains_and_evaluates_on_disjoint_questions(shared_data, tmp_path):
    config = runpy.run_path(str(CPU_CONFIG))["get_config"]()
    config.data.max_examples = 0
    data = ms.QAData.from_section(config.data)
    train = ms.load_qa_sets(data, "train")["hotpotqa"]
    held_out = ms.load_qa_sets(data, "eval")["hotpotqa"]
    assert (len(train), len(held_out)) == (400, 100)
    assert not {e.id for e in train} & {e.id for e in held_out}
    assert not {e.question for e in train} & {e.question for e in held_out}
    assert [e.id for e in ms.load_qa_sets(data, "eval")["hotpotqa"]] == [e.id for e in held_out]
    summary = ms.qa_split_summary(data, "eval")
    assert summary.sizes == {"train": 400, "eval": 100}
    assert "cut by question id, 0.2 to eval (seed 0)" in summary.line()
    # The retrieval corpus pools the paragraphs of all 500 questions (both parts).
    config.retriever.corpus = str(tmp_path / "corpus.jsonl")
    retriever = ms.RetrieverSettings.from_section(config.retriever)
    written = read_corpus(ms.ensure_closed_corpus(retriever, data))
    every = load_hotpotqa(shared_data / "hotpotqa_dev_distractor_500.jsonl")
    assert len(written) == len(build_corpus(hotpot_paragraphs(every)))
    assert len({d.title for d in written}) == 4948
