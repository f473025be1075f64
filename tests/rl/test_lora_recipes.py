"""LoRA through `python -m memjax.launch`: the toy GRPO recipe learns with adapters alone, its
checkpoints hold only adapters and optimizer state (and the base's pointer), and a killed run
resumes to bit-identical adapters; a resume onto another base is refused."""

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from memjax.errors import CheckpointError
from memjax.models.decoder import decoder_abstract
from memjax.models.params import flatten_with_names, init_params
from memjax.rl import toy, trainer
from tests.launcher_env import user_env
from tests.rl.test_trainer import _config, scripted_generate

REPO = Path(__file__).resolve().parents[2]


def _launch(workdir: Path, *overrides: str) -> dict:
    # The launcher's own environment: one CPU device, as a user's run (not the tests' eight).
    env = user_env(drop=("XLA_", "JAX_"))
    cmd = [sys.executable, "-m", "memjax.launch", "--config=configs/toy_grpo.py"]
    # A base sharp enough to express the solution (memjax.rl.toy.toy_params), as a pretrained
    # one is; the adapters alone then have to find it.
    cmd += [f"--workdir={workdir}", "--config.lora.rank=8", "--config.model.init_stddev=0.1"]
    cmd += overrides
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _checkpoint(workdir: Path) -> tuple[int, dict, dict]:
    """(step, state tree as saved, run spec) of a run's newest checkpoint."""
    steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    step_dir = workdir / "checkpoints" / str(steps[-1])
    with ocp.StandardCheckpointer() as ckpt:
        state = ckpt.restore(step_dir / "state")
    spec = json.loads((step_dir / "run_spec" / "metadata").read_text())
    return steps[-1], state, spec


@pytest.mark.heavy
def test_toy_grpo_learns_with_lora_through_the_launcher(tmp_path):
    summary = _launch(tmp_path)
    assert summary["final_reward"] > 0.8, summary
    assert summary["final_reward"] > summary["initial_reward"] + 0.5, summary
    step, state, spec = _checkpoint(tmp_path)
    assert step == summary["steps"]
    # Only adapters (and their AdamW moments) are saved: no base weight, no reference copy.
    names = flatten_with_names(state["policy"]["params"])
    assert names and all(n.split("/")[-1] in ("a", "b") for n in names), sorted(names)
    assert not any("embed" in n for n in flatten_with_names(state))
    # ... and the pointer to their base, which a resume checks.
    assert spec["lora.rank"] == 8 and "random init seed 0" in spec["lora.base_source"]
    assert len(spec["lora.base_fingerprint"]) == 16


@pytest.mark.heavy
def test_kill_and_resume_with_lora_through_the_launcher_gives_identical_adapters(tmp_path):
    small = [
        "--config.num_steps=4",
        "--config.checkpoint_every=2",
        "--config.eval_every=0",
        "--config.prompts_per_step=4",
        "--config.group_size=4",
        "--config.model.num_layers=1",
    ]
    full = _launch(tmp_path / "full", *small)
    _launch(tmp_path / "killed", *small, "--config.stop_after=3")  # dies in step 3, saved at 2
    assert _checkpoint(tmp_path / "killed")[0] == 2
    resumed = _launch(tmp_path / "killed", *small)
    assert resumed["final_reward"] == full["final_reward"]
    (s1, a, _), (s2, b, _) = _checkpoint(tmp_path / "full"), _checkpoint(tmp_path / "killed")
    assert s1 == s2 == 4
    flat_a, flat_b = flatten_with_names(a["policy"]), flatten_with_names(b["policy"])
    assert flat_a.keys() == flat_b.keys()
    for name in flat_a:
        np.testing.assert_array_equal(flat_a[name], flat_b[name], err_msg=name)


def test_resume_onto_another_base_is_refused(tmp_path):
    def run(num_steps, seed):
        config = _config("grpo", num_steps=num_steps)
        config.lora.rank = 4
        cfg = toy.toy_decoder_config(config.model)
        params = init_params(decoder_abstract(cfg), jax.random.key(seed))
        return trainer.train(
            trainer.RLRunConfig.from_section(config),
            tmp_path,
            env=toy.RepeatTargetEnv(3),
            params=params,
            cfg=cfg,
            train_examples=[3, 4, 5],
            eos_ids=(2,),
            generate=scripted_generate(),
            progress=False,
            base_source=f"seed {seed}",
        )

    first = run(2, seed=0)
    # The result's params are the merged weights (base layout); the adapters sit beside them.
    assert set(first["params"]) >= {"embed", "layers"} and "lora" not in first["params"]["layers"]
    assert set(first["adapters"]["layers"]) == {"q", "k", "v", "o", "gate", "up", "down"}
    match = r"saved lora\.base_source=seed 0, now seed 1; saved lora\.base_fingerprint="
    with pytest.raises(CheckpointError, match=match):
        run(4, seed=1)


def _lora_run(config, workdir, seed=0):
    cfg = toy.toy_decoder_config(config.model)
    return trainer.train(
        trainer.RLRunConfig.from_section(config),
        workdir,
        env=toy.RepeatTargetEnv(3),
        params=init_params(decoder_abstract(cfg), jax.random.key(seed)),
        cfg=cfg,
        train_examples=[3, 4, 5, 6, 7],
        eos_ids=(2,),
        generate=scripted_generate(),
        progress=False,
    )


def test_ppo_with_lora_kill_and_resume_gives_identical_adapters_and_critic(tmp_path):
    def config(**kw):
        c = _config("ppo", **kw)
        c.lora.rank = 4
        return c

    full = _lora_run(config(), tmp_path / "full")
    assert _lora_run(config(stop_after=3), tmp_path / "killed")["interrupted_at"] == 3
    resumed = _lora_run(config(), tmp_path / "killed")
    assert resumed["start_step"] == 2
    for name in ("policy", "critic"):
        a, b = flatten_with_names(full["states"][name]), flatten_with_names(resumed["states"][name])
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name}/{k}")
    # The critic trained its adapters and head over the policy's frozen base.
    critic = full["states"]["critic"].params
    assert set(critic) == {"lora", "head", "bias"} and np.abs(np.asarray(critic["head"])).max() > 0
