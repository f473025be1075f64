"""Kill, damage, resume, through `python -m memjax.launch` on the toy GRPO recipe.

A run checkpointing every step is stopped after step 4 (`config.stop_after`, a crash without a
final save); then its three newest steps are damaged three ways (step 4: `_METADATA` deleted,
step 3: an array chunk deleted, step 2: the grain iterator state truncated). The restarted run
must skip those three with one line each, resume from step 1 and end with exactly the
parameters of an uninterrupted run; nowhere may orbax's INFO chatter or a traceback appear.
A restart with another model shape is refused in one line naming the leaf.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[2]
NUM_STEPS = 5
SMALL = [
    "--config=configs/toy_grpo.py",
    f"--config.num_steps={NUM_STEPS}",
    "--config.checkpoint_every=1",
    "--config.eval_every=1",
    "--config.keep_last=4",
    "--config.prompts_per_step=4",
    "--config.group_size=4",
    "--config.model.num_layers=1",
    "--config.model.embed_dim=32",
    "--config.model.mlp_dim=32",
]
ORBAX_INFO = ("checkpoint_manager.py", "CheckpointManagerOptions", "composite_checkpoint_handler")


def _launch(workdir, *extra):
    # The launcher's own environment: one CPU device, as a user's run (not the tests' eight).
    env = user_env()
    cmd = [sys.executable, "-m", "memjax.launch", *SMALL, f"--workdir={workdir}", *extra]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def _steps(workdir):
    return sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())


def _final_arrays(workdir):
    """The arrays of the newest checkpoint, restored as saved (no target tree needed)."""
    step_dir = workdir / "checkpoints" / str(_steps(workdir)[-1])
    with ocp.StandardCheckpointer() as ckptr:
        tree = ckptr.restore(step_dir / "state")
    return ocp.tree.to_flat_dict(tree)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _delete_largest_chunk(step_dir):
    chunks = sorted(
        (step_dir / "state").rglob("ocdbt.process_*/d/*"), key=lambda p: p.stat().st_size
    )
    chunks[-1].unlink()


@pytest.mark.heavy
def test_resume_past_three_damaged_steps_matches_an_uninterrupted_run(tmp_path):
    full = _launch(tmp_path / "full")
    assert full.returncode == 0, full.stderr[-3000:]
    assert not any(marker in full.stderr + full.stdout for marker in ORBAX_INFO), full.stderr

    crashed = tmp_path / "crashed"
    # -v 1 brings the libraries' INFO logs back
    killed = _launch(crashed, "--config.stop_after=4", "--verbosity=1")
    assert _steps(crashed) == [1, 2, 3, 4], killed.stderr[-3000:]
    assert "CheckpointManagerOptions" in killed.stderr
    ckpts = crashed / "checkpoints"
    (ckpts / "4" / "state" / "_METADATA").unlink()
    _delete_largest_chunk(ckpts / "3")
    _truncate(ckpts / "2" / "data" / "process_0-of-1.json")

    resumed = _launch(crashed)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    output = resumed.stderr + resumed.stdout
    assert "Traceback" not in output and not any(m in output for m in ORBAX_INFO), output
    lines = resumed.stderr.splitlines()
    for step, item in ((4, "state"), (3, "state"), (2, "data")):
        skipped = [line for line in lines if f"checkpoints/{step}: skipped, item {item}" in line]
        assert len(skipped) == 1, resumed.stderr[-3000:]
    assert sorted(p.name for p in (ckpts / "damaged").iterdir()) == ["2", "3", "4"]
    assert _steps(crashed)[-1] == NUM_STEPS
    a, b = _final_arrays(tmp_path / "full"), _final_arrays(crashed)
    assert a.keys() == b.keys() and len(a) > 10
    for path in a:
        np.testing.assert_array_equal(a[path], b[path], err_msg=str(path))

    # another model shape in the same workdir: one line naming what differs, nothing moved
    wider = _launch(crashed, f"--config.num_steps={NUM_STEPS + 1}", "--config.model.num_layers=2")
    assert wider.returncode == 2, wider.stderr[-3000:]
    last = wider.stderr.strip().splitlines()[-1]
    assert last.startswith("memjax.launch: error: ") and f"checkpoints/{NUM_STEPS}:" in last
    # the saved run spec names the field before any array is compared
    assert "saved model.num_layers=1, now 2" in last, last
    assert "Traceback" not in wider.stderr
    assert _steps(crashed)[-1] == NUM_STEPS
