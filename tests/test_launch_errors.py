"""What `python -m memjax.launch` prints for an error: one line for a user's, a traceback for a
programming error, the traceback of a user's error only with --debug or MEMJAX_DEBUG=1."""

import logging as py_logging
import subprocess
import sys
from pathlib import Path

import pytest
from absl import flags

from memjax import launch
from memjax.errors import CheckpointError, ConfigError, DataError, UserError
from memjax.log_filter import LibraryFilter
from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def parsed_flags(monkeypatch):
    """The launcher's flags at their defaults, as after a command line without options."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS(["memjax.launch"])
    monkeypatch.setattr(launch, "_quiet_libraries", lambda: None)  # keep the test's logging
    monkeypatch.delenv("MEMJAX_DEBUG", raising=False)


def _raising(error):
    def launch_job(argv):
        raise error

    return launch_job


@pytest.mark.parametrize("kind", [ConfigError, DataError, CheckpointError])
def test_user_error_is_one_line_and_exit_2(parsed_flags, monkeypatch, capsys, kind):
    monkeypatch.setattr(
        launch, "_launch", _raising(kind("config.data.path='x.json': no such file"))
    )
    with pytest.raises(SystemExit) as info:
        launch.main(["memjax.launch"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == "memjax.launch: error: config.data.path='x.json': no such file\n"


def test_debug_shows_the_user_error_traceback(parsed_flags, monkeypatch):
    monkeypatch.setattr(launch, "_launch", _raising(ConfigError("config.algo: bad")))
    monkeypatch.setenv("MEMJAX_DEBUG", "1")
    with pytest.raises(ConfigError, match="config.algo"):
        launch.main(["memjax.launch"])


def test_programming_error_keeps_its_traceback(parsed_flags, monkeypatch):
    monkeypatch.setattr(launch, "_launch", _raising(KeyError("eval_reward")))
    with pytest.raises(KeyError):
        launch.main(["memjax.launch"])


def test_launcher_error_kinds_are_user_errors():
    from memjax import distributed, jobs
    from memjax.checkpoints.decoder_io import CheckpointError as WeightsCheckpointError
    from memjax.model_errors import WeightsNotFoundError

    with pytest.raises(UserError, match=r"config\.job='nope': unknown job"):
        jobs.resolve("nope")
    assert issubclass(distributed.DistributedConfigError, UserError)
    # still the builtin kinds their callers catch
    assert issubclass(WeightsNotFoundError, FileNotFoundError)
    assert issubclass(WeightsCheckpointError, ValueError)
    assert issubclass(WeightsCheckpointError, UserError)


def test_library_filter_keeps_memjax_and_library_warnings():
    def record(name, path, level, message="m"):
        return py_logging.LogRecord(name, level, path, 1, message, None, None)

    keep = LibraryFilter().filter
    orbax = "/venv/site-packages/orbax/checkpoint/checkpoint_manager.py"
    assert not keep(record("absl", orbax, py_logging.INFO))
    assert keep(record("absl", orbax, py_logging.WARNING))
    assert keep(record("absl", str(REPO / "memjax" / "launch.py"), py_logging.INFO))
    assert not keep(record("jax._src.xla_bridge", "/venv/jax/_src/xla_bridge.py", 20))
    # orbax's warning at a save without a metric: an expected event under the schedule
    benign = "Requested `tracked_metric`; did not provide metrics."
    assert not keep(record("absl", orbax, py_logging.WARNING, benign))


def _launch(*args, env_extra=None):
    env = user_env()
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "memjax.launch", *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_missing_workdir_through_the_launcher():
    proc = _launch("--config=configs/toy_grpo.py")
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "memjax.launch: error: --workdir: rl.train needs a directory " + (
        "(checkpoints, TensorBoard, plots)"
    )
    assert "Traceback" not in proc.stderr
    debug = _launch("--config=configs/toy_grpo.py", "--debug")
    assert debug.returncode == 1 and "Traceback" in debug.stderr
    assert "memjax.errors.ConfigError: --workdir" in debug.stderr
