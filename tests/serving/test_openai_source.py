"""The `openai:MODEL@URL` model source against memjax's server: round-robin, retries, the reply
cache (a rerun sends nothing), the API key kept out of every file, the agents' model calls."""

import subprocess
import sys

import pytest

from memjax.agents.episode import ModelCall
from memjax.agents.remote_calls import remote_call_policy
from memjax.errors import ConfigError
from memjax.remote.openai_source import (
    OpenAIModel,
    OpenAISettings,
    RemoteModelError,
    parse_source,
)
from memjax.serving.background import free_port
from tests.serving.conftest import MODEL

HELLO = [{"role": "user", "content": "Name three colours."}]


def test_sources_are_parsed_or_refused_in_one_line():
    assert parse_source("openai:gpt-4o-mini@https://a/v1/, http://b:1/v1") == (
        "gpt-4o-mini",
        ("https://a/v1", "http://b:1/v1"),
    )
    for bad in ("openai:gpt-4o-mini", "openai:@http://a", "openai:m@ftp://a"):
        with pytest.raises(ConfigError, match="model source"):
            parse_source(bad)


def test_a_named_key_variable_must_be_set(monkeypatch):
    monkeypatch.delenv("MEMJAX_TEST_NO_KEY", raising=False)
    with pytest.raises(ConfigError, match="MEMJAX_TEST_NO_KEY"):
        OpenAIModel(
            "m", ["http://127.0.0.1:1/v1"], OpenAISettings(api_key_env="MEMJAX_TEST_NO_KEY")
        )


@pytest.mark.heavy
def test_round_robin_past_a_dead_url_and_a_cached_rerun(server, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMJAX_TEST_KEY", "sk-secret-value-123")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    settings = OpenAISettings(
        api_key_env="MEMJAX_TEST_KEY", max_retries=2, backoff_s=0.0, cache_dir=str(tmp_path)
    )
    model = OpenAIModel(MODEL, [dead, server.url], settings)
    policy = model.chat_policy(max_tokens=6)
    before = server.stats.requests
    first = policy([HELLO, HELLO[:0] + [{"role": "user", "content": "Hi"}]])
    assert server.stats.requests - before == 2 and all(first)
    rerun = OpenAIModel(MODEL, [dead], settings).chat_policy(max_tokens=6)  # no live server
    assert rerun([HELLO, [{"role": "user", "content": "Hi"}]]) == first
    assert server.stats.requests - before == 2
    files = list(tmp_path.rglob("*.json"))
    assert len(files) == 2
    assert not any("sk-secret-value-123" in f.read_text() for f in files)
    changed = OpenAIModel(MODEL, [dead], settings).chat_policy(max_tokens=7)
    with pytest.raises(RemoteModelError, match="no answer after 3 tries"):
        changed([HELLO])  # other sampling settings: not the cached reply


@pytest.mark.heavy
def test_a_refused_request_fails_at_once_with_the_servers_message(server):
    model = OpenAIModel("no-such-model", [server.url], OpenAISettings(max_retries=3))
    with pytest.raises(RemoteModelError, match="HTTP 404"):
        model.chat_policy(max_tokens=4)([HELLO])


@pytest.mark.heavy
def test_agent_calls_continue_the_prefix_and_keep_the_stop_string(server, smollm2):
    model = OpenAIModel(MODEL, [server.url], OpenAISettings(max_retries=0))
    free = remote_call_policy(model, max_tokens=12)([ModelCall(tuple(HELLO), "1.")])[0]
    stop = free.text.split()[1]
    out = remote_call_policy(model, max_tokens=12)([ModelCall(tuple(HELLO), "1.", (stop,))])[0]
    assert out.eos and out.text == free.text[: free.text.index(stop) + len(stop)]


def test_the_serve_job_refuses_a_bad_port_before_loading():
    run = subprocess.run(
        [sys.executable, "-m", "memjax.launch", "--config=configs/serve.py",
         "--config.server.port=70000"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        "memjax.launch: error: config.server.port=70000: expected 0..65535"
    )


@pytest.mark.heavy
def test_sft_make_data_takes_a_teacher_at_an_endpoint(server, client):
    import runpy

    from memjax.experiments.teachers.job import Teachers
    from memjax.experiments.teachers.settings import TeacherSpec

    t = runpy.run_path("configs/sft_data_cpu.py")["get_config"]().teacher
    t.kind, t.source = "model", f"openai:{MODEL}@{server.url}"
    t.temperature, t.max_new_tokens = 0.0, 6
    teachers = Teachers(TeacherSpec.from_section(t))
    direct = client.chat.completions.create(
        model=MODEL, messages=HELLO, temperature=0, max_tokens=6
    )
    assert teachers.chat([HELLO]) == [direct.choices[0].message.content]
    assert (
        teachers.batch([ModelCall(tuple(HELLO))], None)[0].text == direct.choices[0].message.content
    )
