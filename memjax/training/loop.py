"""The step loop SFT and RL share: resume, step, log, evaluate, plot, save.

    result = run_loop(task, loop_config, workdir)

A *task* says what one step is; the loop owns everything around it. SFT and RL differ only in
their task: where a step's batches come from and which loss its updates run.

    class Task(Protocol):
        label: str           # the progress bar's name ("grpo", "ppo", "sft")
        record_prefix: str   # TensorBoard prefix of the step records ("rollout", "data")
        curve: str           # the history key plotted ("reward", "loss")
        eval_key: str        # the eval record's key ("reward", "nll")
        best_mode: str       # "max" or "min": how the best checkpoints rank by eval_key
        has_eval: bool
        states: dict         # name -> TrainState; the loop checkpoints and restores them
        data_iterator        # a grain iterator whose position is checkpointed
        source               # environment-like checkpoint state, or None
        def step(self, step, key) -> (record, train_metrics)   # step counts from 0
        def evaluate(self, step, key) -> float | dict           # step counts from 1; a dict
                                                                # holds eval_key and more
        def postfix(self, record, train_metrics) -> dict[str, str]
        def run_spec(self) -> dict   # what shapes the states; a checkpoint with another is refused

Everything random derives from (seed, step), and a checkpoint holds the states, the RNG, the
data position, the history and the source's state, so a run killed at any point and restarted
in the same workdir ends with the same parameters as an uninterrupted one.

The result's "params" are the last step's, or with `export_from="best"` those of the best-ranked
evaluated step (`result["exported_step"]` says which): the weights a job exports.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
from absl import logging

from memjax import distributed
from memjax import workdir as workdir_lib
from memjax.training.reporting import RunReport
from memjax.training.run_checkpoints import RunCheckpoints, RunState
from memjax.training.schedule import CheckpointPolicy, LoopConfig

EVAL_KEY_SALT = 2**31 - 1  # evaluation draws from its own stream, never a training step's


def run_loop(task, loop: LoopConfig, workdir: str | Path, *, progress: bool = True) -> dict:
    """Runs (or resumes) `task` for `loop.num_steps`; returns the history, evals and states."""
    workdir = workdir_lib.path(workdir)  # a local folder or gs://
    workdir.mkdir(parents=True, exist_ok=True)
    policy = CheckpointPolicy(loop, task.has_eval)
    checkpoints = RunCheckpoints(
        workdir, policy, best_mode=task.best_mode, run_spec=task.run_spec()
    )
    states, run = checkpoints.resume(
        task.states, jax.random.key(loop.seed), task.data_iterator, task.source
    )
    task.states = states
    report = RunReport(
        workdir,
        label=task.label,
        curve=task.curve,
        eval_key=task.eval_key,
        curve_file=getattr(task, "curve_file", "reward_curve.png"),
        total_steps=loop.num_steps,
        start_step=run.step,
        primary=distributed.is_primary(),
        progress=progress,
    )
    t_start = time.perf_counter()
    try:
        if policy.evaluates_before(run.step, run.evals):
            _evaluate(task, run, report)  # step 0: the starting weights
        for step in range(run.step, loop.num_steps):
            if loop.stop_after is not None and step >= loop.stop_after:
                return {"interrupted_at": step, "history": run.history}
            _one_step(task, step, run, policy, checkpoints, report)
        _evaluate_last_if_missing(task, run, policy, report)
        exported_step = _choose_export(task, run, policy, checkpoints)
    finally:
        report.close()
        checkpoints.close()
    return _result(task, run, time.perf_counter() - t_start, exported_step)


def _one_step(task, step: int, run: RunState, policy, checkpoints, report) -> None:
    record, metrics = task.step(step, jax.random.fold_in(run.base_key, step))
    done = step + 1
    run.step = done
    run.history.append({"step": done, **record})
    report.scalars(done, record, task.record_prefix)
    report.scalars(done, metrics, "train")
    value = _evaluate(task, run, report) if policy.evaluates(done) else None
    if policy.plots(done):
        report.plot(run.history, run.evals)
    if policy.saves(done):
        checkpoints.save(run, task.states, task.data_iterator, task.source, metric=value)
    report.advance(**task.postfix(record, metrics))


def _evaluate(task, run: RunState, report) -> float:
    """Evaluates at `run.step`, records it; returns the value that ranks the checkpoint."""
    result = task.evaluate(run.step, jax.random.fold_in(run.base_key, EVAL_KEY_SALT))
    values = result if isinstance(result, dict) else {task.eval_key: result}
    run.evals.append({"step": run.step, **values})
    report.scalars(run.step, values, "eval")
    return values[task.eval_key]


def _evaluate_last_if_missing(task, run: RunState, policy, report) -> None:
    """A run resumed from a checkpoint at its last step runs no step, so `_one_step` never
    evaluates it; when that checkpoint came from a longer run whose schedule skipped the
    step (stopped at 20 of 40 with eval_every=40, resumed with num_steps=20), the last step
    is evaluated here. The checkpoint is left as saved (its step exists); a second resume
    evaluates again, with the same eval key and so the same result."""
    done = run.step
    if not policy.evaluates(done) or any(e["step"] == done for e in run.evals):
        return
    _evaluate(task, run, report)
    report.plot(run.history, run.evals)


def _choose_export(task, run: RunState, policy, checkpoints) -> int:
    """The step whose weights the run returns: the last one, or under `export_from="best"` the
    best-ranked evaluated step, whose restored states then replace the task's."""
    if policy.loop.export_from == "best" and not policy.exports_best:
        logging.warning(
            "export_from='best': no step was evaluated (no eval data); returning the last"
        )
    best = checkpoints.restore_best(task.states, run.base_key) if policy.exports_best else None
    if best is None:
        return run.step
    step, task.states = best
    return step


def _result(task, run: RunState, wall_s: float, exported_step: int) -> dict[str, Any]:
    return {
        "history": run.history,
        "evals": run.evals,
        "states": task.states,
        "params": task.states["policy"].params,
        "exported_step": exported_step,  # whose weights "params" are
        "wall_s": wall_s,
        "start_step": run.start_step,
    }


def model_spec(cfg) -> dict:
    """The decoder fields that shape a checkpoint's arrays (a resume with others is refused)."""
    names = ("model_type", "vocab_size", "embed_dim", "mlp_dim", "num_layers", "num_heads")
    names += ("num_kv_heads", "head_dim", "qkv_bias", "tie_embeddings", "param_dtype")
    return {f"model.{n}": getattr(cfg, n) for n in names if hasattr(cfg, n)}


__all__ = ["run_loop", "model_spec", "EVAL_KEY_SALT"]
