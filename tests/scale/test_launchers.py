"""The launchers' --dry_run output for a GPU cluster and a TPU pod."""

import json
import os
import runpy
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
XM = runpy.run_path(str(REPO / "launch" / "xm_launch.py"))


def dry_run(capsys, *args):
    assert XM["main"](["--dry_run", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_gpu_cluster_through_slurm(capsys):
    spec = dry_run(
        capsys,
        "--config=configs/memsearcher_qwen14b.py",
        "--workdir=/ckpt/ms14b",
        "--platform=gpu",
        "--",
        "--config.model.source=/models/Qwen2.5-14B-Instruct",
    )
    assert (spec["accelerator"], spec["num_hosts"], spec["devices_per_host"]) == (
        "H100-80GB",
        2,
        8,
    )
    assert spec["processes"] == 16 and spec["mesh"] == {"data": 1, "fsdp": 8, "tensor": 2}
    assert spec["overrides"] == []  # the config's own hardware
    (cmd,) = spec["commands"]
    assert cmd.startswith("sbatch --job-name=memsearcher-qwen14b --nodes=2 --ntasks-per-node=8")
    assert "launch/slurm.sh configs/memsearcher_qwen14b.py /ckpt/ms14b" in cmd
    assert cmd.endswith("--config.model.source=/models/Qwen2.5-14B-Instruct")
    assert spec["memory_plan"]["fits"]


def test_gpu_hosts_over_ssh(capsys):
    spec = dry_run(
        capsys,
        "--config=configs/memsearcher_qwen14b.py",
        "--workdir=/ckpt/ms14b",
        "--platform=gpu",
        "--gpu_launcher=ssh",
        "--hosts=gpu-a,gpu-b",
        "--remote_dir=/src/memjax",
    )
    assert spec["processes"] == 2
    assert [e["JAX_PROCESS_ID"] for e in spec["env"]] == ["0", "1"]
    assert {e["JAX_COORDINATOR_ADDRESS"] for e in spec["env"]} == {"gpu-a:8476"}
    assert {e["JAX_NUM_PROCESSES"] for e in spec["env"]} == {"2"}
    a, b = spec["commands"]
    assert a.startswith("ssh gpu-a ") and b.startswith("ssh gpu-b ")
    assert "JAX_PROCESS_ID=1" in b and "cd /src/memjax" in b
    assert "python -m memjax.launch --config=configs/memsearcher_qwen14b.py" in b
    with pytest.raises(SystemExit, match="2 host"):
        XM["main"](
            [
                "--config=configs/memsearcher_qwen14b.py",
                "--workdir=/w",
                "--platform=gpu",
                "--gpu_launcher=ssh",
                "--hosts=gpu-a",
                "--dry_run",
            ]
        )


def test_tpu_pod(capsys):
    spec = dry_run(
        capsys,
        "--config=configs/grpo_qwen7b.py",
        "--workdir=gs://bucket/g7",
        "--platform=tpu",
        "--tpu=v5p-32",
        "--tpu_name=memjax-v5p",
        "--zone=us-east5-a",
        "--create",
    )
    # v5p-32: 16 chips, 4 VMs of 4; one process per VM; fsdp takes what tensor leaves.
    assert (spec["accelerator"], spec["num_hosts"], spec["processes"]) == ("TPU-v5p", 4, 4)
    assert spec["mesh"] == {"data": 1, "fsdp": 8, "tensor": 2}
    assert "--config.hardware.accelerator=TPU-v5p" in spec["overrides"]
    assert "--config.hardware.num_devices=16" in spec["overrides"]
    assert "--config.rl.mesh.fsdp=-1" in spec["overrides"]
    create, scp, ssh = spec["commands"]
    assert "tpu-vm create memjax-v5p" in create and "--accelerator-type=v5p-32" in create
    assert "--worker=all" in scp and "--worker=all" in ssh
    assert "MEMJAX_DISTRIBUTED=auto python -m memjax.launch" in ssh
    assert "--config.hardware.num_devices=16" in ssh and "gs://bucket/g7" in ssh
    assert spec["memory_plan"]["fits"]


def test_wrong_platform_is_an_error():
    with pytest.raises(SystemExit, match="--tpu"):
        XM["main"](["--config=configs/grpo_qwen7b.py", "--workdir=/w", "--platform=tpu"])


def test_plain_scripts_dry_run():
    env = {**os.environ, "DRY_RUN": "1"}
    run = lambda *a: (
        subprocess.run(
            ["bash", *a], cwd=REPO, env=env, capture_output=True, text=True, check=True
        ).stdout
    )
    out = run("launch/slurm.sh", "configs/grpo_qwen7b.py", "/ckpt/g7", "--config.seed=1")
    assert out.strip() == (
        "srun --kill-on-bad-exit=1 python -m memjax.launch --config=configs/grpo_qwen7b.py "
        "--workdir=/ckpt/g7 --config.seed=1"
    )
    out = run("launch/tpu_vm.sh", "memjax-v5p", "us-east5-a", "configs/grpo_qwen7b.py", "gs://b/g7")
    scp, ssh = out.strip().splitlines()
    assert scp.startswith("gcloud compute tpus tpu-vm scp --recurse") and "--worker=all" in scp
    assert "--worker=all" in ssh and "MEMJAX_DISTRIBUTED=auto python -m memjax.launch" in ssh
