"""The real `openai` client against memjax's server on the packaged SmolLM2."""

import concurrent.futures

import httpx2 as httpx
import jax
import openai
import pytest

from memjax.sampling.chat import generate_chat
from memjax.sampling.sampling_params import SamplingParams
from tests.serving.conftest import MODEL

# Every test here runs the packaged SmolLM2 behind a live server (each new request shape is a
# sampler compile): minutes on a 2-core machine.
pytestmark = pytest.mark.heavy

HELLO = [{"role": "user", "content": "Name three colours."}]


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_greedy_chat_equals_generate_chat(client, smollm2):
    reply = client.chat.completions.create(
        model=MODEL, messages=HELLO, temperature=0, max_tokens=12
    )
    local = generate_chat(
        smollm2, None, [HELLO], SamplingParams(max_new_tokens=12, greedy=True), jax.random.key(0)
    )
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == local.texts[0]
    assert choice.finish_reason == (
        "length" if local.output.stop_reason[0] == "max_tokens" else "stop"
    )
    assert reply.usage.completion_tokens == int(local.output.lengths[0])
    assert reply.usage.prompt_tokens == len(smollm2.tokenizer.chat(HELLO))


def test_stop_string_ends_the_text_before_it(client):
    free = client.chat.completions.create(model=MODEL, messages=HELLO, temperature=0, max_tokens=12)
    text = free.choices[0].message.content
    stop = text.split()[1]  # a word the model writes
    cut = client.chat.completions.create(
        model=MODEL, messages=HELLO, temperature=0, max_tokens=12, stop=[stop]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.index(stop)]


def test_n_2_logprobs_and_seed(client):
    kwargs = dict(model=MODEL, messages=HELLO, temperature=1.0, max_tokens=8, n=2, seed=7)
    reply = client.chat.completions.create(logprobs=True, **kwargs)
    assert len(reply.choices) == 2 and [c.index for c in reply.choices] == [0, 1]
    again = client.chat.completions.create(logprobs=True, **kwargs)
    assert [c.message.content for c in again.choices] == [c.message.content for c in reply.choices]
    for choice in reply.choices:
        entries = choice.logprobs.content
        assert entries and all(e.logprob <= 0.0 for e in entries)
        assert "".join(e.token for e in entries).startswith(choice.message.content[:1])


def test_streaming_joins_to_the_whole_reply(client):
    kwargs = dict(model=MODEL, messages=HELLO, temperature=0, max_tokens=10)
    whole = client.chat.completions.create(**kwargs).choices[0]
    stream = client.chat.completions.create(stream=True, **kwargs)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.message.content
    assert chunks[-1].choices[0].finish_reason == whole.finish_reason
    assert len(chunks) > 3  # the role, several pieces, the finish


def test_text_completion(client, smollm2):
    reply = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=6, temperature=0)
    choice = reply.choices[0]
    assert choice.text and choice.finish_reason in ("length", "stop")
    assert reply.usage.prompt_tokens == len(smollm2.tokenizer.encode("The sky is"))


def test_concurrent_requests_share_the_engines_decode_steps(client, server):
    before = server.stats
    prompts = [[{"role": "user", "content": f"Count to {i}."}] for i in range(6)]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        replies = list(
            pool.map(
                lambda m: client.chat.completions.create(
                    model=MODEL, messages=m, temperature=0, max_tokens=4
                ),
                prompts,
            )
        )
    assert all(r.choices[0].message.content for r in replies)
    after = server.stats
    assert after.requests - before.requests == 6
    # A request's first token comes from its prefill; each later one is a decode step of its
    # slot. Fewer steps than those tokens: some steps decoded several requests at once.
    decoded = sum(r.usage.completion_tokens - 1 for r in replies)
    assert after.decode_steps - before.decode_steps < decoded


def test_eight_concurrent_requests_with_their_own_max_tokens(client, smollm2):
    """Each of 8 requests sent at once (different prompts, max_tokens 1..15, joining the
    engine's slots as they arrive) gets the greedy completion generate_chat gives its prompt,
    cut to its own max_tokens."""
    chats = [
        [{"role": "user", "content": f"Tell me a fact about the number {i}."}] for i in range(8)
    ]
    limits = [1 + 2 * i for i in range(8)]
    local = generate_chat(
        smollm2,
        None,
        chats,
        SamplingParams(max_new_tokens=max(limits), greedy=True),
        jax.random.key(0),
    )
    tokenizer = smollm2.tokenizer

    def ask(i):
        return client.chat.completions.create(
            model=MODEL, messages=chats[i], temperature=0, max_tokens=limits[i]
        )

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(ask, range(8)))
    for i, reply in enumerate(replies):
        tokens, k = local.output.completions()[i], limits[i]
        eos = len(tokens) <= k and local.output.stop_reason[i] == "eos"  # it ended in the limit
        cut = tokens if eos else tokens[:k]
        choice = reply.choices[0]
        assert choice.message.content == tokenizer.decode(
            cut[:-1] if eos else cut, skip_special_tokens=True
        )
        assert choice.finish_reason == ("stop" if eos else "length")
        assert reply.usage.completion_tokens == len(cut)


@pytest.mark.parametrize(
    "kwargs, param",
    [
        (dict(messages=HELLO, temperature=3.0), "temperature"),
        (dict(messages=[], max_tokens=4), "messages"),
        (dict(messages=HELLO, max_tokens=10_000), "max_tokens"),
        (dict(messages=HELLO, n=99), "n"),
        (dict(messages=[{"role": "wizard", "content": "x"}]), "messages.0.role"),
        (dict(messages=HELLO, presence_penalty=1.0), "presence_penalty"),
        (dict(messages=[{"role": "user", "content": "word " * 2000}]), "messages"),
    ],
)
def test_malformed_requests_get_openai_shaped_400s(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, **kwargs)
    error = caught.value.body
    assert set(error) >= {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


def test_unknown_model_is_404_json(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-9", messages=HELLO, max_tokens=2)
    assert caught.value.body["code"] == "model_not_found"


def test_raw_bad_bodies_get_json_errors(server):
    url = server.url + "/chat/completions"
    cases = {
        "not json": (b"{nope", 400),
        "a list": (b"[1, 2]", 400),
        "unknown field": (b'{"model": "smollm2", "messages": [], "foo": 1}', 400),
        "too large": (b'{"model": "' + b"x" * 70_000 + b'"}', 413),
    }
    for name, (body, status) in cases.items():
        r = httpx.post(url, content=body, headers={"content-type": "application/json"})
        assert r.status_code == status, name
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, name
    r = httpx.get(server.url + "/nowhere")
    assert r.status_code == 404 and "error" in r.json()
