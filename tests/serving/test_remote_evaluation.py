"""Memory-R1's LoCoMo evaluation with its answer agent and judge behind memjax's server, reached
with the `openai` client: the same predictions as in process, a rerun that sends nothing, and a
server killed mid-evaluation that the evaluation resumes from."""

import json

import pytest

from memjax.agents.memory_r1 import evaluation
from memjax.agents.memory_r1.run_settings import MemoryR1Run
from memjax.recipes.memory_r1 import memory_r1_config
from memjax.remote.openai_source import RemoteModelError
from memjax.serving.background import ThreadedServer
from memjax.serving.openai_app import ServerSettings

pytestmark = pytest.mark.heavy

SETTINGS = ServerSettings(model_name="smollm2", max_prompt_tokens=4096, max_tokens=64)


def _config(tmp_path, url=None):
    config = memory_r1_config("packaged:smollm2", locomo_path="synthetic")
    config.model.param_dtype = "float32"
    config.data.synthetic.num_test = 1
    config.data.split = "test"
    config.data.max_questions = 3
    config.construction.builder = "oracle"  # banks from the data: only answers and verdicts
    config.answer_agent.max_new_tokens = 12
    config.answer_agent.batch_size = 4
    config.judge.max_new_tokens = 12
    if url is not None:
        config.answer.source = config.judge.source = f"openai:smollm2@{url}"
        config.openai.cache_dir = str(tmp_path / "openai_cache")
        config.openai.max_retries = 1
        config.openai.timeout_s = 3600.0  # a first call compiles (minutes on a loaded CPU)
        config.openai.backoff_s = 0.0
    return config


def _predictions(out):
    keys = ("uid", "answer", "output", "judge", "scores")
    return [{k: p[k] for k in keys} for p in out["predictions"]]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory, smollm2):
    workdir = tmp_path_factory.mktemp("in_process")
    return _predictions(evaluation.evaluate(MemoryR1Run.from_config(_config(workdir)), workdir))


def test_over_http_equals_in_process_and_a_rerun_sends_nothing(tmp_path, smollm2, in_process):
    with ThreadedServer(smollm2, SETTINGS) as server:
        out = evaluation.evaluate(
            MemoryR1Run.from_config(_config(tmp_path, server.url)), tmp_path / "first"
        )
        assert _predictions(out) == in_process
        sent = server.stats.requests
        assert sent == 2 * len(in_process)  # every answer and every verdict, once
        again = evaluation.evaluate(
            MemoryR1Run.from_config(_config(tmp_path, server.url)), tmp_path / "again"
        )
        assert _predictions(again) == in_process
        assert server.stats.requests == sent  # all of them read from the reply cache
    report = (tmp_path / "first" / "report_mem0.md").read_text()
    assert f"Judge: smollm2 via OpenAI-compatible API at {server.url}." in report
    assert "Judge:" not in (tmp_path / "first" / "report_official.md").read_text()
    assert json.loads((tmp_path / "first" / "report_mem0.json").read_text())["judge"]


def test_a_server_killed_mid_evaluation_is_resumed_after_a_restart(
    tmp_path, smollm2, in_process, monkeypatch
):
    server = ThreadedServer(smollm2, SETTINGS).__enter__()
    judge_replies = evaluation._judge_replies

    def stop_then_judge(*args):  # the server dies after the answers, before the verdicts
        server.__exit__(None, None, None)
        return judge_replies(*args)

    monkeypatch.setattr(evaluation, "_judge_replies", stop_then_judge)
    config = _config(tmp_path, server.url)
    with pytest.raises(RemoteModelError, match="no answer after 2 tries"):
        evaluation.evaluate(MemoryR1Run.from_config(config), tmp_path / "run")
    assert server.stats.requests == len(in_process)  # the answers, before it died
    monkeypatch.setattr(evaluation, "_judge_replies", judge_replies)
    with ThreadedServer(smollm2, SETTINGS, port=server.port) as restarted:
        out = evaluation.evaluate(MemoryR1Run.from_config(config), tmp_path / "run")
        assert restarted.stats.requests == len(in_process)  # the verdicts only
    assert _predictions(out) == in_process
