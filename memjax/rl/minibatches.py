"""Which rows of a step's packed batch go into each optimizer update: the mini-batch plan.

    plan = plan_mini_batches(row_trajectory, MiniBatchConfig(mode="in_order",
                             rows_per_mini_batch=640), rng)   # list of row-index arrays

Two modes, for two peers' behaviour:

- `"shuffled"` (memjax's default): every epoch the rows of the batch (padding rows included:
  the packed batch is already a multiple of the count) are permuted and cut into
  `num_mini_batches` equal mini-batches, so a step makes `epochs x num_mini_batches` updates
  whatever the number of contexts per trajectory.
- `"in_order"` (MemSearcher's released trainer, icip-cas/MemSearcher @ 83a3bea:
  `ray_trainer.fit` turns seqlen balancing off, and verl's `DataParallelPPOActor.update_policy`
  splits the batch without shuffling into `ppo_mini_batch_size x rollout.n` rows): the step's
  real rows in the order its rollout emits them (every trajectory's first context, then every
  second context still running, ...; `vLLMRolloutWithTool.generate_sequences` appends one turn
  at a time) are cut into consecutive mini-batches of `rows_per_mini_batch` rows, the last one
  smaller. The number of updates follows the contexts: with 256 questions x 5 rollouts per step
  and 128-question mini-batches (640 rows) it is about 2 x the mean contexts per trajectory.
  `shards` reproduces verl's data parallelism exactly: verl first gives each of its `shards`
  ranks a contiguous slice of the rows, and each rank cuts its slice into chunks of
  `rows_per_mini_batch / shards`; update j is the union of every rank's chunk j.

Indices refer to rows of the packed batch; `pad_plan` fills each mini-batch up to a fixed row
count with `PAD_ROW` (an empty row: no loss tokens), so every update has one shape and the train
step compiles once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MODES = ("shuffled", "in_order")
PAD_ROW = -1  # an index meaning "an empty row" (see `take_rows`)


@dataclasses.dataclass(frozen=True)
class MiniBatchConfig:
    mode: str = "shuffled"
    num_mini_batches: int = 1  # "shuffled": updates per epoch
    rows_per_mini_batch: int = 0  # "in_order": verl's ppo_mini_batch_size x rollout.n
    shards: int = 1  # "in_order": verl's data-parallel ranks (1: plain consecutive chunks)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mini-batch mode={self.mode!r}; choose from {MODES}")
        if self.mode == "shuffled" and self.num_mini_batches < 1:
            raise ValueError(f"num_mini_batches={self.num_mini_batches} must be at least 1")
        if self.mode == "in_order":
            if self.rows_per_mini_batch < 1:
                raise ValueError(
                    f"rows_per_mini_batch={self.rows_per_mini_batch} must be at least 1 "
                    "for mode 'in_order'"
                )
            if self.shards < 1 or self.rows_per_mini_batch % self.shards:
                raise ValueError(
                    f"rows_per_mini_batch={self.rows_per_mini_batch} must be a multiple of "
                    f"shards={self.shards}"
                )


def rollout_order(row_trajectory: np.ndarray) -> np.ndarray:
    """The real rows (trajectory >= 0) in MemSearcher's rollout order: by context number
    within the trajectory, then by trajectory. `row_trajectory` [B] is packed trajectory-major
    (memjax.rl.rollout.pack), so a row's context number is its rank among its trajectory's
    rows."""
    traj = np.asarray(row_trajectory)
    real = np.nonzero(traj >= 0)[0]  # [R]
    context_number = np.zeros(len(real), np.int64)
    seen: dict[int, int] = {}
    for n, r in enumerate(real):
        t = int(traj[r])
        context_number[n] = seen.get(t, 0)
        seen[t] = context_number[n] + 1
    order = np.lexsort((traj[real], context_number))  # last key is the primary one
    return real[order]


def _in_order(row_trajectory: np.ndarray, config: MiniBatchConfig) -> list[np.ndarray]:
    rows = rollout_order(row_trajectory)  # [R]
    per_shard = config.rows_per_mini_batch // config.shards
    # verl pads the batch at its end to a multiple of the ranks with masked rows
    # (`recurrent.utils.graceful_padding`), then gives each rank an equal contiguous slice.
    fill = np.full(-len(rows) % config.shards, PAD_ROW, np.int64)
    slices = np.split(np.concatenate([rows, fill]), config.shards)
    n_updates = -(-len(slices[0]) // per_shard)
    plan = []
    for j in range(n_updates):
        parts = [s[j * per_shard : (j + 1) * per_shard] for s in slices]
        plan.append(np.concatenate(parts).astype(np.int64))
    return plan


def _shuffled(num_rows: int, config: MiniBatchConfig, rng: np.random.Generator):
    if num_rows % config.num_mini_batches:
        raise ValueError(
            f"{num_rows} rows do not split into {config.num_mini_batches} equal mini-batches"
        )
    size = num_rows // config.num_mini_batches
    perm = rng.permutation(num_rows)
    return [perm[j * size : (j + 1) * size] for j in range(config.num_mini_batches)]


def plan_mini_batches(
    row_trajectory: np.ndarray, config: MiniBatchConfig, rng: np.random.Generator
) -> list[np.ndarray]:
    """One epoch's mini-batches: a list of row-index arrays, one per optimizer update.
    `row_trajectory` [B]: each packed row's trajectory id, -1 for padding rows."""
    if config.mode == "shuffled":
        return _shuffled(len(row_trajectory), config, rng)
    return _in_order(np.asarray(row_trajectory), config)


def padded_size(config: MiniBatchConfig, row_multiple: int) -> int:
    """The rows every "in_order" update is padded to: the full mini-batch, rounded up to a
    multiple of `row_multiple` (micro-batches x data-parallel devices)."""
    return -(-config.rows_per_mini_batch // row_multiple) * row_multiple


def pad_plan(plan: list[np.ndarray], size: int) -> list[np.ndarray]:
    """Each mini-batch filled up to `size` rows with PAD_ROW."""
    out = []
    for rows in plan:
        if len(rows) > size:
            raise ValueError(f"a mini-batch of {len(rows)} rows does not fit in {size}")
        out.append(np.concatenate([rows, np.full(size - len(rows), PAD_ROW, np.int64)]))
    return out


def take_rows(batch: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The mini-batch's arrays; a PAD_ROW becomes an all-zero row (no tokens, no loss)."""
    rows = np.asarray(rows)
    pad = rows == PAD_ROW
    out = {}
    for k, v in batch.items():
        picked = v[np.where(pad, 0, rows)]
        if pad.any():
            picked = picked.copy()
            picked[pad] = 0
        out[k] = picked
    return out


__all__ = [
    "MODES",
    "PAD_ROW",
    "MiniBatchConfig",
    "pad_plan",
    "padded_size",
    "plan_mini_batches",
    "rollout_order",
    "take_rows",
]
