"""The `memory.serve` job: its config checked at launch (one line, exit 2), and the real
launcher serving Mem0's routes across a restart of the process (heavy)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from ml_collections import ConfigDict

from memjax.errors import ConfigError
from memjax.job_checks import check_inputs, check_job_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "memory_serve.py"


def config(**overrides) -> ConfigDict:
    import runpy

    c = runpy.run_path(str(CONFIG))["get_config"]()
    for dotted, value in overrides.items():
        node = c
        *parents, last = dotted.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return c


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"server__port": 70000}, "config.server.port"),
        ({"server__host": ""}, "config.server.host"),
        ({"server__max_body_bytes": 0}, "config.server.max_body_bytes"),
        ({"memory__related_k": 0}, "config.memory.related_k"),
    ],
)
def test_bad_config_names_the_field(overrides, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        check_job_config("memory.serve", config(**overrides))


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"memory__manager__source": "/no/such/model"}, "config.memory.manager.source"),
        ({"memory__answer__source": "packaged:nope"}, "config.memory.answer.source"),
        (
            {"memory__facts__trained": "/no/such/dir", "memory__facts__source": "packaged:smollm2"},
            "config.memory.facts.trained",
        ),
    ],
)
def test_a_missing_model_names_the_field_before_the_job_starts(overrides, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        check_inputs("memory.serve", config(**overrides))


def test_default_config_passes_its_checks():
    check_job_config("memory.serve", config())
    assert config().server.host == "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(workdir: Path, port: int) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        "-m",
        "memjax.launch",
        f"--config={CONFIG}",
        f"--workdir={workdir}",
        f"--config.server.port={port}",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    while True:  # until it answers or exits: no fixed wait
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read().decode()[-3000:])
        try:
            if requests.get(f"{url}/health", timeout=5).ok:
                return proc, url
        except requests.ConnectionError:
            time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait()


@pytest.mark.heavy
def test_launched_service_keeps_memories_across_a_restart(tmp_path):
    proc, url = _launch(tmp_path, _free_port())
    try:
        body = {
            "messages": [{"role": "user", "content": "I grow tomatoes on my balcony."}],
            "user_id": "fay",
        }
        (added,) = requests.post(f"{url}/memories", json=body).json()["results"]
    finally:
        _stop(proc)
    assert list((tmp_path / "memories" / "users").iterdir())

    proc, url = _launch(tmp_path, _free_port())
    try:
        got = requests.get(f"{url}/memories/{added['id']}").json()
        assert got["memory"] == "I grow tomatoes on my balcony" and got["user_id"] == "fay"
        assert (
            requests.post(
                f"{url}/memories", data=b"{", headers={"Content-Type": "application/json"}
            ).status_code
            == 422
        )
    finally:
        _stop(proc)
