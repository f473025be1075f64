"""Two JAX processes on this machine (coordinator on 127.0.0.1, gloo CPU collectives) run the toy
GRPO recipe's sharded train step and end with the parameters of a single-process run."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("multihost_worker.py")
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(out, *extra, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env.update(env_extra or {})
    cmd = [sys.executable, str(WORKER), "--out", str(out), *extra]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _wait(procs):
    logs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=TIMEOUT_S)
            logs.append(out)
    finally:
        for p in procs:  # never leave a half of the pair waiting on its coordinator
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]


@pytest.mark.heavy
def test_two_processes_match_one(tmp_path):
    port = _free_port()
    multi, single = tmp_path / "multi", tmp_path / "single"
    procs = [
        _start(
            multi,
            "--devices=2",
            "--mesh=1,2,2",  # fsdp spans the two processes, tensor the two devices of each
            "--checkpoint",
            env_extra={
                "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": str(i),
            },
        )
        for i in range(2)
    ]
    procs.append(_start(single, "--devices=1"))
    _wait(procs)

    infos = [json.loads((multi / f"info_{i}.json").read_text()) for i in range(2)]
    ref_info = json.loads((single / "info_0.json").read_text())
    for i, info in enumerate(infos):
        assert (info["process"], info["processes"], info["devices"]) == (i, 2, 4)
        assert info["distributed"] == "env" and info["step"] == 3
    assert ref_info["processes"] == 1 and ref_info["distributed"] is None
    # Each host read its own half of the rows; together, every row once.
    assert infos[0]["row_ids"] == list(range(8)) and infos[1]["row_ids"] == list(range(8, 16))
    assert ref_info["row_ids"] == list(range(16))

    p0, p1 = (np.load(multi / f"params_{i}.npz") for i in range(2))
    ref = np.load(single / "params_0.npz")
    assert set(p0) == set(p1) == set(ref) and len(ref) >= 10
    for name in ref:
        np.testing.assert_array_equal(p0[name], p1[name], err_msg=name)
        np.testing.assert_allclose(p0[name], ref[name], rtol=1e-4, atol=2e-5, err_msg=name)
    # The updates were real: the parameters moved far more than the tolerance above.
    assert infos[0]["max_update"] > 1e-3 and ref_info["max_update"] > 1e-3
    for m_multi, m_ref in zip(infos[0]["metrics"], ref_info["metrics"]):
        for key in ("loss", "pg_loss", "kl", "grad_norm", "tokens"):
            np.testing.assert_allclose(m_multi[key], m_ref[key], rtol=1e-4, err_msg=key)
    assert infos[0]["metrics"][0]["loss"] != infos[0]["metrics"][-1]["loss"]
    # orbax wrote one complete step directory cooperatively from both processes.
    assert (multi / "ckpt" / "3").is_dir()
    # A directory item (memory banks) gets one subfolder per process, written by that process.
    for i in range(2):
        bank = multi / "ckpt" / "3" / "dir_bank" / f"process_{i}" / "bank.txt"
        assert bank.read_text() == f"bank of process {i}"
