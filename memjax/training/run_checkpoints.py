"""Checkpoint and resume for a training run: train states, RNG, data position, history, and the
state of whatever the batches come from (an RL environment's memory banks, an SFT row stream).

    checkpoints = RunCheckpoints(workdir, policy, best_mode="max", run_spec={"algo": "grpo"})
    run = checkpoints.resume(states, base_key, data_iterator, source)   # a fresh RunState if none
    ...
    checkpoints.save(run, states, data_iterator, source, metric=0.7)
    step, states = checkpoints.restore_best(states, base_key)   # None when nothing was ranked
    # a restart with another run_spec (algorithm, model shape) is refused in one line

`source` is anything with the environment's checkpoint protocol (`checkpoint_state()`,
`restore_state(d)`, `has_dir_state`, `save_dir(path)`, `load_dir(path)`), or None.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax

from memjax import workdir as workdir_lib
from memjax.training.checkpointing import Checkpointer
from memjax.training.schedule import CheckpointPolicy

BEST_METRIC = "eval_metric"  # the checkpoint metric key the best-K policy ranks by


@dataclasses.dataclass
class RunState:
    """Everything besides arrays that a resumed run must continue from."""

    step: int  # steps completed
    base_key: jax.Array  # every random choice derives from (base_key, step)
    history: list[dict]  # one record per step
    evals: list[dict]  # one record per evaluation
    start_step: int  # where this process started (0, or the step it resumed from)


class RunCheckpoints:
    def __init__(
        self, workdir: Path, policy: CheckpointPolicy, *, best_mode: str = "max", run_spec=None
    ):
        # What shapes the state (algorithm, model shape): a checkpoint saved with another one is
        # refused with one line naming the field, before any array is read.
        self.run_spec = run_spec
        self.ranks_best = policy.keep_best > 0  # else orbax's "best" step is just the latest
        self.checkpointer = Checkpointer(
            workdir_lib.path(workdir) / "checkpoints",
            keep_last=policy.keep_last,
            keep_best=policy.keep_best,
            best_metric=BEST_METRIC if policy.keep_best else None,
            best_mode=best_mode,
        )

    def resume(self, states: dict, base_key, data_iterator, source) -> tuple[dict, RunState]:
        """(states, RunState) from the newest checkpoint; the fresh ones when there is none.
        `states` (the fresh ones) give the shapes and shardings to restore onto; the data
        iterator is restored in place."""
        fresh = RunState(0, base_key, [], [], 0)
        if self.checkpointer.latest_step() is None:
            return states, fresh
        dirs = {"env": source.load_dir} if _has_dirs(source) else None
        out = self.checkpointer.restore(
            _abstract(states, base_key),
            data_iterator=data_iterator,
            with_extra=True,
            dirs=dirs,
            run_spec=self.run_spec,
        )
        restored, extra = out["state"], out["extra"]
        if source is not None and extra.get("env") is not None:
            source.restore_state(extra["env"])
        run = RunState(
            step=out["step"],
            base_key=jax.random.wrap_key_data(restored["rng"]),
            history=list(extra["history"]),
            evals=list(extra["evals"]),
            start_step=out["step"],
        )
        return {k: restored[k] for k in states}, run

    def save(self, run: RunState, states: dict, data_iterator, source, metric=None) -> None:
        """Saves step `run.step`; `metric` (the step's eval result, if it had one) ranks it."""
        tree = {**states, "rng": jax.random.key_data(run.base_key)}
        extra: dict[str, Any] = {"history": run.history, "evals": run.evals}
        extra["env"] = source.checkpoint_state() if source is not None else None
        dirs = {"env": source.save_dir} if _has_dirs(source) else None
        metrics = {BEST_METRIC: metric} if metric is not None else None
        self.checkpointer.save(
            run.step,
            tree,
            data_iterator=data_iterator,
            extra=extra,
            dirs=dirs,
            metrics=metrics,
            run_spec=self.run_spec,
        )

    def restore_best(self, states: dict, base_key) -> tuple[int, dict] | None:
        """(step, states) of the best-ranked saved step, or None when none was ranked (no
        eval ran, or `keep_best` is 0). `states` give the shapes and shardings to restore onto;
        the data position and the source are left alone: the run is over."""
        if not self.ranks_best:
            return None
        self.checkpointer.wait()  # the last save may still be in flight
        best = self.checkpointer.best_step()
        if best is None:
            return None
        out = self.checkpointer.restore(
            _abstract(states, base_key), step=best, run_spec=self.run_spec
        )
        return out["step"], {k: out["state"][k] for k in states}

    def close(self) -> None:
        self.checkpointer.close()


def _abstract(states: dict, base_key) -> dict:
    """The saved tree's shapes, dtypes and shardings: the train states and the RNG key."""
    tree = {**states, "rng": jax.random.key_data(base_key)}
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


def _has_dirs(source) -> bool:
    return source is not None and bool(getattr(source, "has_dir_state", False))


__all__ = ["RunCheckpoints", "RunState", "BEST_METRIC"]
