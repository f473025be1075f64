"""The toy recipes end to end through `python -m memjax.launch`: the real sampler, trainer,
checkpoints, TensorBoard and reward plot, with the mean reward rising above 0.8 (issue 4)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.heavy
@pytest.mark.parametrize("recipe", ["toy_grpo", "toy_ppo"])
def test_toy_recipe_learns_through_the_launcher(tmp_path, recipe):
    # The launcher's own environment: one CPU device, as a user's run (not the tests' eight).
    env = user_env(drop=("XLA_", "JAX_"))
    cmd = [
        sys.executable,
        "-m",
        "memjax.launch",
        f"--config=configs/{recipe}.py",
        f"--workdir={tmp_path}",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])  # the last line is the summary
    assert summary["final_reward"] > 0.8, summary
    assert summary["final_reward"] > summary["initial_reward"] + 0.5, summary
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps and steps[-1] == summary["steps"]
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())
    assert (tmp_path / "reward_curve.png").stat().st_size > 1000
