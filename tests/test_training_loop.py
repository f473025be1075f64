"""The shared step loop without a model: a task whose 'training' adds one to a counter, so that
what the loop evaluates, saves and resumes can be checked exactly."""

import dataclasses
import json

import jax.numpy as jnp
import optax
import pytest

from memjax.errors import ConfigError
from memjax.training import train_step
from memjax.training.loop import run_loop
from memjax.training.reporting import CURVES_FILE
from memjax.training.schedule import LoopConfig


class CountingTask:
    label, record_prefix, curve, eval_key, best_mode = "count", "data", "loss", "nll", "min"
    has_eval = True
    data_iterator = None
    source = None

    def __init__(self):
        params = {"w": jnp.zeros((3,), jnp.float32)}
        self.states = {"policy": train_step.init_train_state(params, optax.sgd(1.0))}
        self.evaluated_at: list[int] = []

    def step(self, step, key):
        policy = self.states["policy"]
        self.states["policy"] = dataclasses.replace(policy, params={"w": policy.params["w"] + 1.0})
        return {"loss": 1.0 / (step + 1)}, {}

    def evaluate(self, step, key):
        self.evaluated_at.append(step)
        return float(self.states["policy"].params["w"][0])  # the steps trained so far

    def postfix(self, record, metrics):
        return {}

    def run_spec(self):
        return {"task": "count"}


def _run(workdir, **loop):
    task = CountingTask()
    result = run_loop(task, LoopConfig(**loop), workdir, progress=False)
    return task, result


def test_the_last_step_is_evaluated_and_a_resume_continues_the_counter(tmp_path):
    task, result = _run(tmp_path, num_steps=4, eval_every=3, checkpoint_every=1)
    assert task.evaluated_at == [3, 4]
    assert [e["nll"] for e in result["evals"]] == [3.0, 4.0]
    task, result = _run(tmp_path, num_steps=6, eval_every=3, checkpoint_every=1)
    assert result["start_step"] == 4 and task.evaluated_at == [6]
    assert [e["step"] for e in result["evals"]] == [3, 4, 6]
    assert float(result["params"]["w"][0]) == 6.0


def test_a_resume_at_a_longer_runs_unevaluated_step_evaluates_it(tmp_path):
    # A run planned for 8 steps with eval_every=8 is stopped after its save at step 4; resumed
    # as a 4-step run, no step runs, and step 4 had no eval: it is evaluated once, at the end.
    task, result = _run(tmp_path, num_steps=8, eval_every=8, checkpoint_every=4, stop_after=5)
    assert result["interrupted_at"] == 5 and task.evaluated_at == []
    task, result = _run(tmp_path, num_steps=4, eval_every=8, checkpoint_every=4)
    assert result["start_step"] == 4
    assert task.evaluated_at == [4]
    assert result["evals"] == [{"step": 4, "nll": 4.0}]


def test_a_finished_run_resumed_again_is_not_evaluated_twice(tmp_path):
    _run(tmp_path, num_steps=2, eval_every=1)
    task, result = _run(tmp_path, num_steps=2, eval_every=1)
    assert task.evaluated_at == [] and [e["step"] for e in result["evals"]] == [1, 2]


def test_eval_before_evaluates_the_starting_weights_once_and_never_exports_them(tmp_path):
    # The counting task's eval is the steps trained, so the step-0 point is 0.0 (the starting
    # weights) and is the best nll; it is still never a checkpoint to export.
    loop = dict(num_steps=2, eval_every=2, eval_before=True, keep_best=1, export_from="best")
    task, result = _run(tmp_path, **loop)
    assert task.evaluated_at == [0, 2]
    assert result["evals"] == [{"step": 0, "nll": 0.0}, {"step": 2, "nll": 2.0}]
    assert result["exported_step"] == 2
    curves = json.loads((tmp_path / CURVES_FILE).read_text())  # the plot's numbers, for reports
    assert curves["evals"] == result["evals"] and [h["step"] for h in curves["history"]] == [1, 2]
    # Resumed longer, past step 0: the starting point is already recorded and not taken again.
    task, result = _run(tmp_path, **(loop | {"num_steps": 4}))
    assert task.evaluated_at == [4] and [e["step"] for e in result["evals"]] == [0, 2, 4]


def test_eval_before_without_an_eval_schedule_evaluates_nothing(tmp_path):
    task, result = _run(tmp_path, num_steps=2, eval_every=0, eval_before=True)
    assert task.evaluated_at == [] and result["evals"] == []


def test_without_an_eval_schedule_nothing_is_evaluated(tmp_path):
    task, result = _run(tmp_path, num_steps=3, eval_every=0)
    assert task.evaluated_at == [] and result["evals"] == []


def test_export_from_best_returns_the_best_evaluated_steps_weights(tmp_path):
    # The counting task's eval (nll, lower is better) is the number of steps trained, so the
    # best-ranked evaluated step is the first one, 2; the last step, 6, is what "last" returns.
    loop = dict(num_steps=6, eval_every=2, keep_best=1, keep_last=1)
    _, last = _run(tmp_path / "last", **loop)
    assert last["exported_step"] == 6 and float(last["params"]["w"][0]) == 6.0
    _, best = _run(tmp_path / "best", **loop, export_from="best")
    assert best["exported_step"] == 2 and float(best["params"]["w"][0]) == 2.0
    assert [e["step"] for e in best["evals"]] == [2, 4, 6]  # the history is the whole run's
    # A finished run resumed runs no step and still returns the best step's weights.
    task, again = _run(tmp_path / "best", **loop, export_from="best")
    assert task.evaluated_at == [] and float(again["params"]["w"][0]) == 2.0


def test_export_from_best_without_eval_data_returns_the_last_step(tmp_path):
    task = CountingTask()
    task.has_eval = False
    loop = LoopConfig(num_steps=3, eval_every=1, export_from="best")
    result = run_loop(task, loop, tmp_path, progress=False)
    assert result["exported_step"] == 3 and float(result["params"]["w"][0]) == 3.0


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"export_from": "first"}, "config.rl.export_from='first': choose from ('last', 'best')"),
        ({"export_from": "best", "eval_every": 0}, "config.rl.eval_every=0: export_from='best'"),
        ({"export_from": "best", "keep_best": 0}, "config.rl.keep_best=0: export_from='best'"),
    ],
)
def test_export_from_is_checked_at_the_boundary(fields, message):
    loop = dataclasses.replace(LoopConfig(num_steps=2, eval_every=1), **fields)
    with pytest.raises(ConfigError) as e:
        loop.validate("config.rl")
    assert str(e.value).startswith(message)
