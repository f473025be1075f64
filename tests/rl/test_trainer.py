"""The rollout loop and the trainer: multi-turn / multi-context packing, kill-and-resume.

`scripted_generate` below stands in for the sampler where the test is about the loop's
bookkeeping (masks, contexts, checkpoints), not about sampling: its tokens depend only on the
rng it is given, which is exactly what makes resumption checkable. The toy recipes (test_recipes)
run the real sampler.
"""

import json

import jax
import numpy as np
import pytest

from memjax.errors import ConfigError
from memjax.models.decoder import decoder_abstract
from memjax.models.params import init_params
from memjax.rl import rollout, toy, trainer
from memjax.rl.environment import Environment, StepResult
from memjax.training.reporting import summary_line


def scripted_generate(vocab=16, n=3):
    def generate(prompts, rng):
        keys = jax.random.split(rng, len(prompts))
        out = []
        for k, p in zip(keys, prompts):
            toks = np.asarray(jax.random.randint(k, (n,), 3, vocab)).tolist()
            toks = [(t + len(p)) % (vocab - 3) + 3 for t in toks]
            out.append(rollout.Completion(toks, [-1.0] * n, "length"))
        return out

    generate.params = None
    return generate


class ToolEnv(Environment):
    """Turn 1: a tool call whose result (9, 9) is appended; turn 2: a fresh context [7] (a
    rebuilt memory context); turn 3: done with reward = first token of the last completion."""

    max_turns = 4

    def reset(self, example):
        return 0, [1, example]

    def step(self, state, completion, stop_reason):
        if state == 0:
            return 1, StepResult(done=False, observation=[9, 9], info={"tool_calls": 1})
        if state == 1:
            return 2, StepResult(done=False, next_context=[7])
        return 3, StepResult(done=True, reward=float(completion[0]))


def test_multi_turn_multi_context_rollout_and_packing():
    env = ToolEnv()
    trajs = rollout.run_episodes(env, [4, 5], 2, scripted_generate(), jax.random.key(0))
    assert len(trajs) == 4 and [t.group for t in trajs] == [0, 0, 1, 1]
    t = trajs[0]
    assert len(t.contexts) == 2 and t.turns == 3 and t.info == {"tool_calls": 1.0}
    first, second = t.contexts
    # [prompt(2) | completion(3) | tool result(2) | completion(3)], then [7 | completion(3)]
    assert first.trainable == [False] * 2 + [True] * 3 + [False] * 2 + [True] * 3
    assert first.tokens[5:7] == [9, 9] and second.tokens[0] == 7
    assert second.trainable == [False] + [True] * 3
    assert t.reward == float(second.tokens[1])
    batch = rollout.pack(trajs, seq_len=12, pad_id=0, row_multiple=3)
    assert batch["tokens"].shape == (9, 12)  # 8 contexts padded to a multiple of 3
    np.testing.assert_array_equal(batch["trajectory"], [0, 0, 1, 1, 2, 2, 3, 3, -1])
    np.testing.assert_array_equal(batch["loss_mask"][0, :10], first.trainable)
    assert not batch["loss_mask"][8].any() and not batch["token_mask"][0, 10:].any()
    np.testing.assert_array_equal(batch["sampler_logp"][0, 2:5], -1.0)
    assert batch["sampler_logp"][0, 5] == 0.0


def test_truncated_episode_gets_truncated_reward():
    class Never(Environment):
        max_turns = 2

        def reset(self, example):
            return None, [1]

        def step(self, state, completion, stop_reason):
            return state, StepResult(done=False, observation=[5])

        def truncated_reward(self, state):
            return -1.0

    trajs = rollout.run_episodes(Never(), [0], 1, scripted_generate(), jax.random.key(1))
    assert trajs[0].reward == -1.0 and trajs[0].info["truncated"] == 1.0 and trajs[0].turns == 2


def _config(algo, **kw):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "configs" / f"toy_{algo}.py"
    spec = importlib.util.spec_from_file_location("toy_cfg", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.get_config()
    c.num_steps, c.prompts_per_step, c.group_size = 4, 4, 4
    c.checkpoint_every, c.eval_every, c.plot_every = 2, 0, 2
    c.model.embed_dim, c.model.mlp_dim, c.model.num_layers = 32, 32, 1
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def _run(config, workdir, train_examples=(3, 4, 5, 6, 7), eval_examples=(), scripted=True):
    """A toy run; `scripted=False` samples with the real sampler (its greedy evals change as
    the policy learns, where the scripted generator's do not)."""
    cfg = toy.toy_decoder_config(config.model)
    params = jax.jit(lambda k: init_params(decoder_abstract(cfg), k))(jax.random.key(config.seed))
    return trainer.train(
        trainer.RLRunConfig.from_section(config),
        workdir,
        env=toy.RepeatTargetEnv(3),
        params=params,
        cfg=cfg,
        train_examples=list(train_examples),
        eval_examples=list(eval_examples),
        eos_ids=(2,),
        generate=scripted_generate() if scripted else None,
        progress=False,
    )


def test_a_decode_wave_the_run_time_mesh_cannot_split_is_refused(tmp_path):
    """fsdp=-1 is sized from the devices (8 here) only when the run starts: 4 rows, one group,
    cannot split over 8 batch shards, so the run stops before its first rollout."""
    config = _config("grpo", decode_batch=4, mesh={"data": 1, "fsdp": -1, "tensor": 1})
    with pytest.raises(ConfigError, match=r"^decode_batch=4 on .*: must be a multiple of 8 "):
        _run(config, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("algo", ["grpo", pytest.param("ppo", marks=pytest.mark.heavy)])
def test_kill_and_resume_gives_the_same_parameters(tmp_path, algo):
    full = _run(_config(algo), tmp_path / "full")
    part = _run(_config(algo, stop_after=3), tmp_path / "killed")  # dies after step 3, saved at 2
    assert part["interrupted_at"] == 3
    resumed = _run(_config(algo), tmp_path / "killed")
    assert resumed["start_step"] == 2
    assert [h["reward"] for h in resumed["history"]] == [h["reward"] for h in full["history"]]
    for a, b in zip(jax.tree.leaves(full["params"]), jax.tree.leaves(resumed["params"])):
        np.testing.assert_array_equal(a, b)
    assert (tmp_path / "full" / "reward_curve.png").stat().st_size > 1000
    assert any((tmp_path / "full" / "tb").iterdir())
    line = summary_line(full)
    assert '"initial_reward"' in line and '"final_reward"' in line


def test_keep_best_with_steps_off_the_eval_schedule_finishes_and_resumes(tmp_path):
    """keep_best=1 with saves that have no eval result (num_steps not a multiple of eval_every,
    checkpoints more frequent than evals): the run finishes, and a killed run resumes to the
    same parameters. The last step is always evaluated and saved."""
    kw = dict(num_steps=5, eval_every=2, checkpoint_every=1, keep_best=1, keep_last=1)

    def run(workdir, **extra):
        return _run(_config("grpo", **kw, **extra), workdir, eval_examples=[3, 4])

    full = run(tmp_path / "full")
    assert [e["step"] for e in full["evals"]] == [2, 4, 5]
    assert run(tmp_path / "killed", stop_after=3)["interrupted_at"] == 3
    resumed = run(tmp_path / "killed")
    assert resumed["start_step"] == 3
    for a, b in zip(jax.tree.leaves(full["params"]), jax.tree.leaves(resumed["params"])):
        np.testing.assert_array_equal(a, b)
    from memjax.training.checkpointing import Checkpointer

    steps = Checkpointer(tmp_path / "full" / "checkpoints").all_steps()
    assert 5 in steps  # the last step, evaluated, is kept


class ScheduledEvalEnv(toy.RepeatTargetEnv):
    """The toy task whose k-th evaluation scores every episode `schedule[k]`: which step
    validates best is then fixed by the test, not by which way a random model's greedy
    answers fall on one CPU."""

    def __init__(self, schedule, examples_per_eval):
        super().__init__(3)
        self.schedule, self.per_eval, self.episodes = schedule, examples_per_eval, 0

    def step(self, state, completion, stop_reason):
        state, result = super().step(state, completion, stop_reason)
        reward = self.schedule[self.episodes // self.per_eval]
        self.episodes += 1
        return state, StepResult(done=True, reward=reward, info=result.info)


def test_export_from_best_returns_the_weights_of_the_best_validation_step(tmp_path):
    """With every step evaluated, export_from="best" returns the weights the run had at its
    best-scoring eval (step 3 of 5 here): exactly those of the same run stopped there."""
    eval_examples = [3, 4, 5]

    def run(workdir, num_steps=5, **extra):
        config = _config("grpo", num_steps=num_steps, eval_every=1, checkpoint_every=0, **extra)
        cfg = toy.toy_decoder_config(config.model)
        key = jax.random.key(config.seed)
        params = jax.jit(lambda k: init_params(decoder_abstract(cfg), k))(key)
        eval_env = ScheduledEvalEnv([0.2, 0.4, 0.9, 0.5, 0.3], len(eval_examples))
        return trainer.train(
            trainer.RLRunConfig.from_section(config), workdir, env=toy.RepeatTargetEnv(3), params=params, cfg=cfg,
            train_examples=[3, 4, 5, 6, 7], eval_examples=eval_examples, eos_ids=(2,),
            eval_env=eval_env, progress=False,
        )  # fmt: skip

    best = run(tmp_path / "best", export_from="best", keep_best=1, keep_last=1)
    rewards = {e["step"]: e["reward"] for e in best["evals"]}
    assert sorted(rewards) == [1, 2, 3, 4, 5]
    step = best["exported_step"]
    assert step == 3 and rewards[step] == max(rewards.values())
    stopped = run(tmp_path / "stopped", num_steps=step)
    for a, b in zip(jax.tree.leaves(best["params"]), jax.tree.leaves(stopped["params"])):
        np.testing.assert_array_equal(a, b)
    summary = json.loads(summary_line(best))
    assert summary.get("exported_step", 5) == step and summary["steps"] == 5


@pytest.mark.parametrize("eval_every", [0, 3])
def test_keep_best_without_matching_evals_does_not_crash(tmp_path, eval_every):
    config = _config("grpo", num_steps=2, eval_every=eval_every, checkpoint_every=1, keep_best=1)
    out = _run(config, tmp_path, train_examples=[3, 4], eval_examples=[3])
    assert len(out["history"]) == 2


@pytest.mark.parametrize(
    "fields, updates",
    [
        # MemSearcher's trainer: 8 context rows (4 trajectories x 2 contexts) in chunks of 3.
        ({"mini_batch_mode": "in_order", "mini_batch_rows": 3}, 3),
        ({"mini_batch_mode": "shuffled", "mini_batches": 2}, 2),  # memjax's fixed count
    ],
)
def test_the_step_makes_the_updates_the_mini_batch_plan_says(fields, updates):
    config = _config("grpo", prompts_per_step=2, group_size=2, micro_batches=2, **fields)
    rc = trainer.RLRunConfig.from_section(config)
    cfg = toy.toy_decoder_config(config.model)
    params = jax.jit(lambda k: init_params(decoder_abstract(cfg), k))(jax.random.key(0))
    task = trainer.RLTask(
        rc,
        env=ToolEnv(),
        params=params,
        cfg=cfg,
        train_examples=[3, 4],
        eval_examples=(),
        eos_ids=(2,),
        pad_id=0,
        generate=scripted_generate(),
    )
    task.step(0, jax.random.key(1))
    assert int(task.states["policy"].step) == updates


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"mini_batch_mode": "random"}, "mini_batch_mode"),
        ({"mini_batch_mode": "in_order"}, "mini_batch_rows"),
        ({"mini_batch_mode": "in_order", "mini_batch_rows": 5, "mini_batch_shards": 2}, "shards"),
    ],
)
def test_bad_mini_batch_fields_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        trainer.RLRunConfig.from_section(_config("grpo", **fields))
