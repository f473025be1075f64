"""The teachers draw from training data only, and the split's name says which."""

from types import SimpleNamespace

import pytest

from memjax.experiments.teachers.data_split import choose_split


def test_locomo_train_is_conv26_and_heldout_is_the_test_conversations():
    ids = ["conv-26", "conv-30", "conv-41", "conv-42"]
    convs = [SimpleNamespace(sample_id=i) for i in ids]
    train, name = choose_split("locomo", convs, "train")
    assert [c.sample_id for c in train] == ["conv-26"] and "conv-26" in name
    test, _ = choose_split("locomo", convs, "heldout")
    assert [c.sample_id for c in test] == ["conv-41", "conv-42"]  # validation conv-30 in neither


def test_hotpotqa_teacher_split_is_memsearchers_own_eval_cut():
    """The teachers never draw from a question memsearcher.eval holds out: the same cut by id."""
    import runpy
    from pathlib import Path
    from types import SimpleNamespace

    from memjax.data.splits import held_out_ids

    items = [SimpleNamespace(id=f"q{i}") for i in range(500)]
    train, train_name = choose_split("hotpotqa", items, "train")
    held, held_name = choose_split("hotpotqa", items, "heldout")
    cpu_config = Path(__file__).resolve().parents[3] / "configs" / "memsearcher_cpu.py"
    data = runpy.run_path(str(cpu_config))["get_config"]().data
    evaluated = held_out_ids([x.id for x in items], data.shared_file_eval_fraction, data.split_seed)
    assert {x.id for x in held} == evaluated and not {x.id for x in train} & evaluated
    assert len(train) == 400 and len(held) == 100
    assert train_name == "hotpotqa:train_400_of_500_by_id(seed 0)"


def test_synthetic_splits_are_named_by_seed_and_the_train_seed_is_never_held_out():
    assert choose_split("synthetic", [1, 2], "train", seed=1000)[1] == "synthetic:train_seed1000"
    with pytest.raises(ValueError, match="training seed"):
        choose_split("synthetic", [1], "heldout", seed=1000)
    with pytest.raises(ValueError, match="config.split"):
        choose_split("hotpotqa", [1], "dev")
