"""The mini-batch plan: memjax's shuffled fixed count and MemSearcher's in-order row chunks."""

import numpy as np
import pytest

from memjax.rl.minibatches import (
    PAD_ROW,
    MiniBatchConfig,
    pad_plan,
    padded_size,
    plan_mini_batches,
    rollout_order,
    take_rows,
)

# Packed trajectory-major (memjax.rl.rollout.pack): trajectory 0 has 3 contexts, 1 has one,
# 2 has two; two padding rows at the end.
ROWS = np.array([0, 0, 0, 1, 2, 2, -1, -1])


def test_rollout_order_is_context_major_like_memsearchers_rollout():
    # First contexts of trajectories 0, 1, 2 (rows 0, 3, 4), then second contexts of the
    # trajectories still running (rows 1, 5), then the third (row 2); padding left out.
    assert rollout_order(ROWS).tolist() == [0, 3, 4, 1, 5, 2]


def test_in_order_chunks_consecutive_rows_last_one_smaller():
    plan = plan_mini_batches(ROWS, MiniBatchConfig("in_order", rows_per_mini_batch=4), None)
    assert [p.tolist() for p in plan] == [[0, 3, 4, 1], [5, 2]]


def test_in_order_with_shards_matches_verls_per_rank_split():
    # 9 one-context trajectories on 2 ranks: verl pads to 10 with a masked row at the end,
    # rank 0 takes rows 0-4 and rank 1 rows 5-8 + the pad; each rank cuts chunks of 4 / 2.
    rows = np.arange(9)
    plan = plan_mini_batches(
        rows, MiniBatchConfig("in_order", rows_per_mini_batch=4, shards=2), None
    )
    assert [p.tolist() for p in plan] == [[0, 1, 5, 6], [2, 3, 7, 8], [4, PAD_ROW]]


def test_in_order_update_count_follows_the_contexts():
    # MemSearcher's train.sh: 256 questions x 5 rollouts, ppo_mini_batch_size 128 -> 640 rows.
    rng = np.random.default_rng(0)
    contexts = rng.integers(1, 6, size=256 * 5)  # 1..5 contexts per trajectory
    row_traj = np.repeat(np.arange(256 * 5), contexts)
    plan = plan_mini_batches(row_traj, MiniBatchConfig("in_order", rows_per_mini_batch=640), None)
    assert len(plan) == -(-len(row_traj) // 640)
    assert abs(len(plan) - 2 * contexts.mean()) <= 1
    assert sorted(np.concatenate(plan).tolist()) == list(range(len(row_traj)))
    assert all(len(p) == 640 for p in plan[:-1])


def test_shuffled_is_a_seeded_partition_into_equal_parts():
    config = MiniBatchConfig("shuffled", num_mini_batches=2)
    a = plan_mini_batches(ROWS, config, np.random.default_rng([0, 3]))
    b = plan_mini_batches(ROWS, config, np.random.default_rng([0, 3]))
    c = plan_mini_batches(ROWS, config, np.random.default_rng([0, 4]))
    assert [p.tolist() for p in a] == [p.tolist() for p in b]
    assert [p.tolist() for p in a] != [p.tolist() for p in c]
    assert [len(p) for p in a] == [4, 4]
    assert sorted(np.concatenate(a).tolist()) == list(range(len(ROWS)))
    with pytest.raises(ValueError, match="do not split into 3"):
        plan_mini_batches(ROWS, MiniBatchConfig("shuffled", num_mini_batches=3), None)


def test_padding_gives_one_shape_and_empty_rows():
    config = MiniBatchConfig("in_order", rows_per_mini_batch=3)
    size = padded_size(config, row_multiple=2)
    assert size == 4
    plan = pad_plan(plan_mini_batches(ROWS, config, None), size)
    assert [p.tolist() for p in plan] == [[0, 3, 4, PAD_ROW], [1, 5, 2, PAD_ROW]]
    batch = {"loss_mask": np.ones((8, 5), bool), "tokens": np.arange(40).reshape(8, 5) + 1}
    mb = take_rows(batch, plan[0])
    assert mb["tokens"][:3].tolist() == batch["tokens"][[0, 3, 4]].tolist()
    assert not mb["loss_mask"][3].any() and not mb["tokens"][3].any()
    assert batch["loss_mask"].all()  # the step's batch is not touched


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "random"}, "choose from"),
        ({"mode": "in_order"}, "rows_per_mini_batch=0"),
        ({"mode": "in_order", "rows_per_mini_batch": 5, "shards": 2}, "multiple of shards"),
        ({"mode": "shuffled", "num_mini_batches": 0}, "at least 1"),
    ],
)
def test_bad_config_is_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MiniBatchConfig(**kwargs)
