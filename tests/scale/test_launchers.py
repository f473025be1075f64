"""The launchers: launch/xm_launch.py (an XManager experiment) and the plain shell scripts.

The XManager tests build the executors and images the cloud jobs would get (nothing is
submitted to a cloud), check that a unit memjax.launch's dry run refuses stops the launch, and
run the toy GRPO recipe for real through XManager's local executor, as a sweep of two units.
"""

import importlib.util
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from ml_collections import ConfigDict

from memjax import hardware as hw_lib
from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "launch" / "xm_launch.py"


def _xm_launch():
    """launch/xm_launch.py as a module, loaded once per process (it defines absl flags)."""
    name = "memjax_xm_launch_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


XM = _xm_launch()
# 2 hosts x 8 H100, mesh data 1, fsdp 8, tensor 2
GPU_CONFIG = runpy.run_path(str(REPO / "configs" / "memsearcher_qwen14b.py"))["get_config"]()


def _run_launcher(tmp_path, *args):
    env = {**user_env(), "HOME": str(tmp_path / "home")}  # xmanager's database: ~/.xmanager
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_a_sweep_becomes_work_units_with_their_own_workdirs():
    units = XM.work_units(
        "gs://b/run/", ["--config.num_steps=2"], ["seed=0,1", "config.optimizer.learning_rate=1,2"]
    )
    assert [u.workdir for u in units] == [f"gs://b/run/wu{i}" for i in (1, 2, 3, 4)]
    assert units[3].args == (
        "--config.num_steps=2",
        "--config.seed=1",
        "--config.optimizer.learning_rate=2",
    )
    assert units[0].launch_args("configs/x.py")[:4] == [
        "-m",
        "memjax.launch",
        "--config=configs/x.py",
        "--workdir=gs://b/run/wu1",
    ]
    (single,) = XM.work_units("/w", ["--config.seed=3"], [])
    assert single.workdir == "/w" and single.args == ("--config.seed=3",)
    with pytest.raises(XM.LaunchError, match="--sweep=seed: write"):
        XM.work_units("/w", [], ["seed"])


def test_a_tpu_slice_retargets_the_config():
    opts = XM.Options(config="c.py", workdir="/w", executor="kubernetes", tpu="v5p-32")
    tgt = XM.target(GPU_CONFIG, opts)
    assert tgt.hardware == hw_lib.parse_tpu_slice("v5p-32")
    assert tgt.overrides == (
        "--config.hardware.accelerator=TPU-v5p",
        "--config.hardware.num_devices=16",
        "--config.mesh.data=1",
        "--config.mesh.fsdp=-1",
        "--config.mesh.tensor=2",
    )
    assert XM.target(GPU_CONFIG, XM.Options(config="c.py", workdir="/w")).overrides == ()
    with pytest.raises(XM.LaunchError, match="runs with --executor=local only"):
        XM.target(
            ConfigDict({"seed": 0}), XM.Options(config="c.py", workdir="/w", executor="vertex")
        )


def test_cloud_executors_ask_for_the_configs_hardware():
    from xmanager import xm

    opts = XM.Options(config="c.py", workdir="gs://b/w", slurm_host="login.example")
    gpus = hw_lib.from_config(GPU_CONFIG.hardware)  # 2 hosts x 8 H100
    vertex = XM.make_executor("vertex", gpus, opts)
    assert vertex.requirements.task_requirements[xm.ResourceType.H100] == 8
    assert vertex.requirements.replicas == 2
    tpus = hw_lib.parse_tpu_slice("v5p-32")  # 4 hosts x 4 chips
    gke = XM.make_executor("kubernetes", tpus, opts)
    assert gke.requirements.task_requirements[xm.ResourceType.TPU_V5P] == 4
    assert gke.requirements.replicas == 4 and gke.tpu_capability.tpu_runtime_version == "v5p"
    with pytest.raises(XM.LaunchError, match="TPU v2/v3 only"):
        XM.make_executor("vertex", tpus, opts)
    slurm = XM.make_executor("slurm", gpus, opts)  # one task per GPU
    assert slurm.requirements.replicas == 16
    assert slurm.requirements.cluster.ssh.endpoints[0].hostname == "login.example"
    with pytest.raises(XM.LaunchError, match="--slurm_host"):
        XM.make_executor("slurm", gpus, XM.Options(config="c.py", workdir="/w"))


def test_the_image_holds_the_wheel_and_configs_not_the_checkout(tmp_path):
    dockerfile = XM.stage_image(tmp_path, "python:3.11-slim", "cuda,gcs")
    top = sorted(p.name for p in tmp_path.iterdir())
    assert top == ["Dockerfile", "configs", "dist"]
    (wheel,) = (tmp_path / "dist").iterdir()
    assert wheel.name.startswith("memjax-") and wheel.suffix == ".whl"
    assert (tmp_path / "configs" / "toy_grpo.py").is_file()
    text = dockerfile.read_text()
    assert 'pip install --no-cache-dir "$(ls dist/memjax-*.whl)[cuda,gcs]"' in text
    assert text.splitlines()[0] == "FROM python:3.11-slim"
    assert ".venv" not in text


def test_a_unit_the_dry_run_refuses_stops_the_launch(tmp_path):
    workdir = tmp_path / "run"
    result = _run_launcher(
        tmp_path,
        "--config=configs/toy_grpo.py",
        f"--workdir={workdir}",
        "--sweep=seed=0,1",
        "--",
        "--config.no_such_field=1",
    )
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xm_launch: error: "), result.stderr
    assert "no_such_field" in lines[0] and "wu1" in lines[0]
    # nothing was submitted: no experiment in xmanager's database, no workdir
    assert not (tmp_path / "home" / ".xmanager").exists()
    assert not workdir.exists()


@pytest.mark.heavy
def test_toy_grpo_sweep_through_xmanagers_local_executor(tmp_path):
    workdir = tmp_path / "run"
    steps = 2
    result = _run_launcher(
        tmp_path,
        "--config=configs/toy_grpo.py",
        f"--workdir={workdir}",
        "--sweep=seed=0,1",
        "--",
        f"--config.num_steps={steps}",
        "--config.checkpoint_every=1",
        "--config.eval_every=1",
        "--config.prompts_per_step=4",
        "--config.group_size=4",
        "--config.model.num_layers=1",
        "--config.model.embed_dim=32",
        "--config.model.mlp_dim=32",
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "2 work unit(s)" in result.stdout
    assert (tmp_path / "home" / ".xmanager").is_dir()  # the experiment is in xmanager's db
    histories = []
    for unit in ("wu1", "wu2"):
        assert (workdir / unit / "checkpoints" / str(steps)).is_dir(), result.stdout[-3000:]
        curves = json.loads((workdir / unit / "curves.json").read_text())
        assert [h["step"] for h in curves["history"]] == list(range(1, steps + 1))
        histories.append(curves["history"])
    # the sweep's seeds reached the jobs: the two runs sampled differently
    assert histories[0] != histories[1]


def test_plain_scripts_install_the_project_on_the_hosts():
    env = {**os.environ, "DRY_RUN": "1", "STAGE": "/tmp/stage"}
    run = lambda *a: (
        subprocess.run(
            ["bash", *a], cwd=REPO, env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    out = run("launch/slurm.sh", "configs/grpo_qwen7b.py", "/ckpt/g7", "--config.seed=1")
    setup, cmd = out.strip().splitlines()
    assert setup.startswith("srun --ntasks-per-node=1 ")
    assert f"/bin/pip install --quiet '{REPO}[cuda,gcs]'" in setup
    assert cmd.startswith("srun --kill-on-bad-exit=1 ")
    assert cmd.endswith(
        "/bin/python -m memjax.launch --config=configs/grpo_qwen7b.py --workdir=/ckpt/g7 "
        "--config.seed=1"
    )
    out = run("launch/tpu_vm.sh", "memjax-v5p", "us-east5-a", "configs/grpo_qwen7b.py", "gs://b/g7")
    wheel, configs, scp, install, job = out.strip().splitlines()
    assert wheel.endswith(f"pip wheel --no-deps --quiet -w /tmp/stage/memjax {REPO}")
    assert configs == f"cp -r {REPO}/configs /tmp/stage/memjax/configs"
    # only the staged wheel and configs travel, never the checkout (its .venv)
    assert "scp --recurse /tmp/stage/memjax memjax-v5p:~/" in scp and "--worker=all" in scp
    assert "pip install --quiet './memjax-0.1.0-py3-none-any.whl[tpu,gcs]'" in install
    assert "--worker=all" in job and "MEMJAX_DISTRIBUTED=auto python3 -m memjax.launch" in job
    assert ".venv" not in out
