"""The teachers draw from training data only, and the split's name says which."""

from types import SimpleNamespace

import pytest

from memjax.sft.teachers.data_split import choose_split


def test_locomo_train_is_conv26_and_heldout_is_the_test_conversations():
    ids = ["conv-26", "conv-30", "conv-41", "conv-42"]
    convs = [SimpleNamespace(sample_id=i) for i in ids]
    train, name = choose_split("locomo", convs, "train")
    assert [c.sample_id for c in train] == ["conv-26"] and "conv-26" in name
    test, _ = choose_split("locomo", convs, "heldout")
    assert [c.sample_id for c in test] == ["conv-41", "conv-42"]  # validation conv-30 in neither


def test_hotpotqa_train_and_heldout_parts_are_disjoint_and_cover_the_file():
    items = list(range(500))
    train, train_name = choose_split("hotpotqa", items, "train")
    held, held_name = choose_split("hotpotqa", items, "heldout")
    assert train == items[:400] and held == items[400:]
    assert (train_name, held_name) == ("hotpotqa:first_400_of_500", "hotpotqa:last_100_of_500")


def test_synthetic_splits_are_named_by_seed_and_the_train_seed_is_never_held_out():
    assert choose_split("synthetic", [1, 2], "train", seed=1000)[1] == "synthetic:train_seed1000"
    with pytest.raises(ValueError, match="training seed"):
        choose_split("synthetic", [1], "heldout", seed=1000)
    with pytest.raises(ValueError, match="config.split"):
        choose_split("hotpotqa", [1], "dev")
