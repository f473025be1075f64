"""When memjax starts JAX's distributed runtime, from config and launcher environments."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.distributed import DistributedConfigError, plan_initialization

REPO = Path(__file__).resolve().parents[2]


def test_single_host_starts_nothing():
    assert plan_initialization({}, {}) is None
    assert plan_initialization({"distributed": {"coordinator": ""}}, {"HOME": "/x"}) is None
    # One Slurm task, one TPU worker, or a coordinator for one process: still one process.
    slurm1 = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1", "SLURM_PROCID": "0"}
    assert plan_initialization({}, {**slurm1, "SLURM_NTASKS": "1"}) is None
    assert plan_initialization({}, {"TPU_WORKER_HOSTNAMES": "w0"}) is None
    env1 = {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}
    assert plan_initialization({}, env1) is None


def test_our_launchers_environment():
    env = {"JAX_COORDINATOR_ADDRESS": "h0:8476", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    plan = plan_initialization({}, env)
    assert (plan.source, plan.coordinator_address, plan.num_processes, plan.process_id) == (
        "env",
        "h0:8476",
        4,
        3,
    )
    assert plan.kwargs()["cluster_detection_method"] == "deactivate"
    with pytest.raises(DistributedConfigError, match="JAX_PROCESS_ID"):
        plan_initialization({}, {"JAX_COORDINATOR_ADDRESS": "h0:1", "JAX_NUM_PROCESSES": "2"})
    with pytest.raises(DistributedConfigError, match="outside"):
        plan_initialization({}, {**env, "JAX_PROCESS_ID": "4"})
    with pytest.raises(DistributedConfigError, match="not an integer"):
        plan_initialization({}, {**env, "JAX_NUM_PROCESSES": "two"})


def test_config_fields_win_over_environment():
    config = {
        "distributed": {"coordinator": "c:9", "num_processes": 2, "process_id": 1},
    }
    env = {"JAX_COORDINATOR_ADDRESS": "h0:8476", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    plan = plan_initialization(config, env)
    assert (plan.source, plan.coordinator_address, plan.num_processes, plan.process_id) == (
        "config",
        "c:9",
        2,
        1,
    )
    bad = {"distributed": {"coordinator": "c:9", "num_processes": 0, "process_id": -1}}
    with pytest.raises(DistributedConfigError, match="config.distributed.num_processes"):
        plan_initialization(bad, {})


def test_slurm_tpu_and_switches():
    slurm = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "16",
    }
    plan = plan_initialization({}, slurm)
    assert plan.source == "slurm" and plan.kwargs()["cluster_detection_method"] == "slurm"
    assert plan.coordinator_address is None  # JAX derives it from the node list
    assert plan_initialization({}, {"TPU_WORKER_HOSTNAMES": "w0,w1,w2,w3"}).source == "tpu"
    assert plan_initialization({}, {"MEGASCALE_COORDINATOR_ADDRESS": "m:1"}).source == "tpu"
    assert plan_initialization({}, {"MEMJAX_DISTRIBUTED": "auto"}).source == "auto"
    assert plan_initialization({}, {**slurm, "MEMJAX_DISTRIBUTED": "off"}) is None


def test_launch_reports_a_broken_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env.update(JAX_COORDINATOR_ADDRESS="127.0.0.1:1", JAX_NUM_PROCESSES="2", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memjax.launch",
            "--config=configs/demo.py",
            f"--workdir={tmp_path}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "memjax.launch: error:" in out.stderr and "JAX_PROCESS_ID" in out.stderr
