"""The live server (real uvicorn) on a tiny random model, on the engine and on the lock-step
batcher (`engine=False`): the same greedy completions, and the engine's own limit refused as
the model's context is. Fast: the packaged SmolLM2 runs in test_openai_server.py."""

import types

import httpx2 as httpx
import numpy as np
import pytest

from memjax.serving.background import ThreadedServer
from memjax.serving.batcher import Batcher
from memjax.serving.engine_batcher import EngineBatcher
from memjax.serving.openai_app import ServerSettings
from tests.sampling.tiny import ToyTokenizer, tiny_model

PARAMS, CFG = tiny_model(seed=1)
PROMPTS = ["abcabca", "cab", "bbacbbacaab"]


def _model():
    tokenizer = ToyTokenizer(CFG.vocab_size)
    tokenizer.eos_ids = (5,)
    return types.SimpleNamespace(params=PARAMS, cfg=CFG, tokenizer=tokenizer)


def _settings(**kw) -> ServerSettings:
    return ServerSettings(model_name="tiny", max_prompt_tokens=32, max_tokens=16, **kw)


def _complete(server, **body) -> httpx.Response:
    body = {"model": "tiny", "temperature": 0, "logprobs": 0} | body
    return httpx.post(server.url + "/completions", json=body, timeout=300)


def test_engine_and_lock_step_servers_give_the_same_greedy_completions():
    replies = {}
    for engine in (True, False):
        with ThreadedServer(_model(), _settings(engine=engine)) as server:
            kind = EngineBatcher if engine else Batcher
            assert isinstance(server.app.state.batcher, kind)
            r = _complete(server, prompt=PROMPTS, max_tokens=9, n=2)
            assert r.status_code == 200, r.text
            replies[engine] = r.json()
            assert server.stats.requests == len(PROMPTS)
    a, b = replies[True], replies[False]
    assert len(a["choices"]) == 2 * len(PROMPTS)
    assert a["usage"] == b["usage"]
    for x, y in zip(a["choices"], b["choices"]):
        assert (x["index"], x["text"], x["finish_reason"]) == (
            y["index"],
            y["text"],
            y["finish_reason"],
        )
        assert x["logprobs"]["tokens"] == y["logprobs"]["tokens"]
        np.testing.assert_allclose(
            x["logprobs"]["token_logprobs"], y["logprobs"]["token_logprobs"], atol=1e-5
        )


@pytest.mark.parametrize("max_tokens, status", [(8, 200), (9, 400)])
def test_the_engines_max_len_bounds_prompt_plus_max_tokens(max_tokens, status):
    with ThreadedServer(_model(), _settings(max_len=20)) as server:
        r = _complete(server, prompt="abcabcabcabcabcabcabcabcabcabcabcabc", max_tokens=max_tokens)
    assert r.status_code == status, r.text  # 12 prompt tokens
    if status == 400:
        error = r.json()["error"]
        assert (error["param"], error["code"]) == ("max_tokens", "context_length_exceeded")
        assert "server's max_len of 20" in error["message"]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("slots", 0, "config.server.slots=0: must be >= 1"),
        ("max_len", 1, "config.server.max_len=1: must be >= 2, or 0 for max_prompt_tokens"),
    ],
)
def test_the_serve_job_names_a_bad_engine_setting_in_one_line(field, value, message):
    import runpy

    from memjax.errors import ConfigError
    from memjax.serving.openai_job import serve_config

    config = runpy.run_path("configs/serve.py")["get_config"]()
    assert serve_config(config).api.engine  # the engine by default
    config.server[field] = value
    with pytest.raises(ConfigError) as caught:
        serve_config(config)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
