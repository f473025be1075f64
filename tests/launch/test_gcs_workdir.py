"""A gs:// workdir end to end, against a GCS emulator on 127.0.0.1.

The toy GRPO run writes its checkpoints, TensorBoard events, curve and curve numbers to
gs://<bucket>/run, is stopped after step 2 (`config.stop_after`, a crash without a final save),
and the restarted run resumes from the bucket and ends with exactly the parameters of an
uninterrupted run. Without gcsfs, a gs:// workdir is refused in one line before anything exists.
"""

import os
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.launch.gcs_emulator import gcs_emulator
from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[2]
NUM_STEPS = 4
BUCKET = "memjax-runs"
SMALL = [
    f"--config={REPO / 'configs' / 'toy_grpo.py'}",
    f"--config.num_steps={NUM_STEPS}",
    "--config.checkpoint_every=1",
    "--config.eval_every=2",
    "--config.plot_every=1",
    "--config.keep_last=3",
    "--config.prompts_per_step=4",
    "--config.group_size=4",
    "--config.model.num_layers=1",
    "--config.model.embed_dim=32",
    "--config.model.mlp_dim=32",
]


def _launch(workdir, *extra, env_extra=None, cwd=REPO):
    env = {**user_env(), **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "memjax.launch", *SMALL, f"--workdir={workdir}", *extra]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _final_state(checkpoints) -> dict:
    step = max(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit())
    with ocp.StandardCheckpointer() as ckptr:
        return ocp.tree.to_flat_dict(ckptr.restore(checkpoints / str(step) / "state")), step


@pytest.mark.heavy
def test_killed_run_resumes_from_a_bucket_bit_identically(tmp_path, monkeypatch):
    from etils import epath

    full = _launch(tmp_path / "full")
    assert full.returncode == 0, full.stderr[-3000:]
    with gcs_emulator(BUCKET) as env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        run = epath.Path(f"gs://{BUCKET}/run")
        killed = _launch(run, "--config.stop_after=2", env_extra=env)
        assert killed.returncode == 0, killed.stderr[-3000:]
        steps = sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit())
        assert steps == [1, 2], killed.stderr[-3000:]

        resumed = _launch(run, env_extra=env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        # this process listed the bucket before the resumed run wrote to it (etils's gcsfs)
        fsspec.filesystem("gcs", finalize_on_close=True).invalidate_cache()
        assert "Traceback" not in resumed.stderr
        a, step_a = _final_state(epath.Path(tmp_path / "full" / "checkpoints"))
        b, step_b = _final_state(run / "checkpoints")
        assert step_a == step_b == NUM_STEPS
        assert a.keys() == b.keys() and len(a) > 5
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=str(key))
        # everything else the run shows lives in the bucket too
        assert (run / "reward_curve.png").read_bytes().startswith(b"\x89PNG")
        assert '"history"' in (run / "curves.json").read_text()
        events = list((run / "tb").glob("events.out.tfevents.*"))
        assert events and all(e.stat().length > 0 for e in events)
    assert not (REPO / "gs:").exists()


def test_gs_workdir_without_gcsfs_is_one_line(tmp_path):
    # A gcsfs that fails to import, first on the path: the installation without the gcs extra.
    shadow = tmp_path / "shadow" / "gcsfs"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('gcsfs is not installed')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), str(REPO)])}
    result = _launch(f"gs://{BUCKET}/run", env_extra=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memjax.launch: error: --workdir=gs://memjax-runs/run:")
    assert "memjax[gcs]" in lines[0]
    assert not (tmp_path / "gs:").exists()
