"""The shared step loop without a model: a task whose 'training' adds one to a counter, so that
what the loop evaluates, saves and resumes can be checked exactly."""

import dataclasses

import jax.numpy as jnp
import optax

from memjax.rl import train_step
from memjax.training.loop import run_loop
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


def test_without_an_eval_schedule_nothing_is_evaluated(tmp_path):
    task, result = _run(tmp_path, num_steps=3, eval_every=0)
    assert task.evaluated_at == [] and result["evals"] == []
