"""Every input checked before anything expensive (memjax.job_checks.check_inputs), each failure
one line naming the file, field or URL: config files, output directory, data files, corpus,
index, retriever URL, and the empty cases."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from memjax import job_checks
from memjax.errors import ConfigError, DataError
from memjax.recipes.memory_r1 import memory_r1_config
from memjax.recipes.memsearcher import memsearcher_config
from memjax.rl.trainer import example_stream
from tests.launcher_env import user_env

REPO = Path(__file__).resolve().parents[1]
HOTPOT = {
    "id": "h1",
    "question": "Who wrote Hamlet?",
    "answer": "Shakespeare",
    "context": {"title": ["Hamlet"], "sentences": [["Hamlet is a play by Shakespeare."]]},
}


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _ms_config(tmp_path, **retriever) -> object:
    qa = tmp_path / "my_set.jsonl"
    qa.write_text(json.dumps(HOTPOT) + "\n")
    config = memsearcher_config("packaged:smollm2")
    config.job = "memsearcher.eval"
    config.data.eval_files = f"mine={qa}"
    config.retriever.kind = "in_process"
    config.retriever.corpus = str(tmp_path / "corpus.jsonl")
    config.retriever.index_dir = str(tmp_path / "index")
    config.retriever.update(retriever)
    return config


def test_config_file_problems_name_the_file(tmp_path):
    assert job_checks.check_config_file(str(tmp_path / "nope.py")).endswith("nope.py: no such file")
    bad = tmp_path / "bad.py"
    bad.write_text("def get_config(:\n    pass\n")
    assert job_checks.check_config_file(str(bad)) == f"{bad}:1: not valid Python (invalid syntax)"
    bad.write_text("x = 1\n")
    assert job_checks.check_config_file(str(bad)) == f"{bad}: defines no get_config() " + (
        "returning the config"
    )
    bad.write_text("from configs.memsearcher_cpu import get_config\n")
    assert job_checks.check_config_file(str(bad)) is None


def test_a_dead_retriever_url_fails_in_seconds_naming_it(tmp_path):
    url = _dead_url()
    config = _ms_config(tmp_path, kind="http", url=url)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=f"config.retriever.url='{url}': no retrieval server"):
        job_checks.check_inputs("memsearcher.eval", config, str(tmp_path / "out"))
    assert time.perf_counter() - t0 < job_checks.URL_TIMEOUT_S + 5


def test_a_url_that_does_not_answer_the_route(tmp_path):
    class NotRetrieval(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), NotRetrieval)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(ConfigError, match="POST /retrieve answered HTTP 404"):
            job_checks.check_retriever_url(url)
    finally:
        server.shutdown()
        server.server_close()


def test_workdir_that_cannot_be_written(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        job_checks.check_workdir(str(a_file))
    job_checks.check_workdir(str(tmp_path / "new" / "deeper"))  # makeable: fine, not made
    assert not (tmp_path / "new").exists()
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ConfigError, match="not writable"):
            job_checks.check_workdir(str(locked / "run"))
    # A directory nothing can be made in whatever the permission bits say (root included).
    if os.path.isdir("/proc/self"):
        with pytest.raises(ConfigError, match=r"--workdir=/proc/memjax/run: not writable"):
            job_checks.check_workdir("/proc/memjax/run")
    job_checks.check_workdir("gs://bucket/run")  # memjax.workdir's to check, not a local path
    assert not Path("gs:").exists()


def test_corpus_file_and_eval_only_data(tmp_path):
    config = _ms_config(tmp_path)  # the paper's training files do not exist: not needed
    job_checks.check_inputs("memsearcher.eval", config, None)
    with pytest.raises(DataError, match=r"config.data.train.\w+='/data/FlashRAG_datasets/"):
        job_checks.check_inputs("memsearcher.train", config, None)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": 1, "text": "no contents"}\n')
    with pytest.raises(DataError, match=r'corpus.jsonl:1: a corpus record is \{"id", "contents"'):
        job_checks.check_inputs("memsearcher.eval", config, None)


def test_a_set_without_paragraphs_needs_a_corpus(tmp_path):
    config = _ms_config(tmp_path)
    nq = tmp_path / "nq.jsonl"
    nq.write_text(json.dumps({"id": "q", "question": "q?", "golden_answers": ["a"]}) + "\n")
    config.data.eval_files = f"nq={nq}"
    with pytest.raises(DataError, match=r"\(nq.jsonl\) carry no paragraphs to pool into a closed"):
        job_checks.check_inputs("memsearcher.eval", config, None)


def test_empty_conversations_and_empty_training_sets(tmp_path):
    sessionless = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
        },
        "qa": [{"question": "q?", "answer": "a", "evidence": [], "category": 4}],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sessionless]))
    config = memory_r1_config("unused", locomo_path=str(path))
    config.data.conversations = "conv-x"
    with pytest.raises(DataError, match="conversation conv-x has no turns in any session"):
        job_checks.check_conversations(config, None)
    with pytest.raises(DataError, match="train_examples is empty"):
        example_stream([], seed=0)


def _launch(*args):
    cmd = [sys.executable, "-m", "memjax.launch", *args]
    env = {**user_env(), "JAX_PLATFORMS": "cpu"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc, time.perf_counter() - t0


@pytest.mark.heavy  # two launches of the whole stack: about a minute on a loaded 2-core machine
def test_through_the_launcher_dead_url_and_missing_model(tmp_path):
    """Exit 2 with one line; the model path fails before any corpus is written or embedded."""
    url = _dead_url()
    common = [
        "--config=configs/memsearcher_cpu.py",
        f"--workdir={tmp_path / 'out'}",
        "--config.job=memsearcher.eval",
        f"--config.data.eval_files=mine={tmp_path / 'mine.jsonl'}",
    ]
    (tmp_path / "mine.jsonl").write_text(json.dumps(HOTPOT) + "\n")
    proc, _ = _launch(*common, "--config.retriever.kind=http", f"--config.retriever.url={url}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"memjax.launch: error: config.retriever.url='{url}': no retrieval server answers"
        )
    )
    proc, _ = _launch(
        *common,
        "--config.model.source=/nope/Qwen",
        f"--config.retriever.corpus={tmp_path / 'corpus.jsonl'}",
        f"--config.retriever.index_dir={tmp_path / 'index'}",
    )
    assert proc.returncode == 2 and "/nope/Qwen" in proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "corpus.jsonl").exists() and not (tmp_path / "index").exists()


def test_config_file_errors_through_the_launcher(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def get_config(:\n")
    proc, _ = _launch(f"--config={bad}")
    assert proc.returncode == 2 and proc.stderr == (
        f"memjax.launch: error: {bad}:1: not valid Python (invalid syntax)\n"
    )
