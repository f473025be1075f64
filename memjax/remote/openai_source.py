"""A model behind any OpenAI-compatible endpoint, where memjax would call a local one.

    model = OpenAIModel.from_source("openai:gpt-4o-mini@https://api.openai.com/v1",
                                    OpenAISettings(api_key_env="OPENAI_API_KEY"))
    texts = model.chat_policy(max_tokens=64)([[{"role": "user", "content": "Hi"}], ...])

A source is written `openai:MODEL@URL[,URL...]`: the model name the endpoint knows and one or
more base URLs (requests go round-robin over them, as a judge spread over several vLLM
servers). The API key is read from the environment variable `api_key_env` names when the
client is made; it never enters a config, a cache file, a log or a report. Each request is
retried on connection errors, timeouts, 429 and 5xx with exponential backoff (the next try goes
to the next URL); a 4xx is the request's own fault and is raised at once. At most
`max_concurrency` requests are in flight per model.

With `cache_dir`, every reply is kept on disk under the SHA-256 of its request (model, messages,
sampling settings; see response_cache.py): a rerun sends nothing, and a stopped evaluation
resumes with the replies it already has.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from memjax.errors import ConfigError, UserError
from memjax.remote.response_cache import ResponseCache

PREFIX = "openai:"


class RemoteModelError(UserError, RuntimeError):
    """An endpoint that could not answer after every retry, or refused a request."""


@dataclasses.dataclass(frozen=True)
class OpenAISettings:
    """How to reach an endpoint (the model and URLs come from the source string)."""

    api_key_env: str = ""  # the environment variable holding the key; "" sends none
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0  # the first retry's wait; doubled each time, at most 30 s
    max_concurrency: int = 8
    cache_dir: str = ""  # "" keeps no replies

    def __post_init__(self):
        if self.timeout_s <= 0:
            raise ConfigError(f"openai.timeout_s={self.timeout_s}: must be > 0")
        if self.max_retries < 0:
            raise ConfigError(f"openai.max_retries={self.max_retries}: must be >= 0")
        if self.backoff_s < 0:
            raise ConfigError(f"openai.backoff_s={self.backoff_s}: must be >= 0")
        if self.max_concurrency < 1:
            raise ConfigError(f"openai.max_concurrency={self.max_concurrency}: must be >= 1")


def is_openai_source(source: str) -> bool:
    return str(source).startswith(PREFIX)


def parse_source(source: str) -> tuple[str, tuple[str, ...]]:
    """'openai:MODEL@URL[,URL...]' -> (MODEL, URLs); one line naming the source when malformed."""
    body = str(source)[len(PREFIX) :]
    model, sep, urls = body.partition("@")
    base_urls = tuple(u.strip().rstrip("/") for u in urls.split(",") if u.strip())
    if not model or not sep or not base_urls:
        raise ConfigError(
            f"model source {source!r}: expected openai:MODEL@URL[,URL...], e.g. "
            "openai:gpt-4o-mini@https://api.openai.com/v1"
        )
    bad = [u for u in base_urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ConfigError(f"model source {source!r}: {bad[0]!r} is not an http(s) URL")
    return model, base_urls


def settings_from_config(section) -> OpenAISettings:
    """OpenAISettings from a config's `openai` section (absent fields keep their defaults)."""
    if section is None:
        return OpenAISettings()
    fields = {f.name: f.type for f in dataclasses.fields(OpenAISettings)}
    kinds = {"str": str, "float": float, "int": int}
    values = {k: kinds[fields[k]](section[k]) for k in fields if k in section}
    return OpenAISettings(**values)


class OpenAIModel:
    def __init__(self, model: str, base_urls: Sequence[str], settings: OpenAISettings):
        from openai import OpenAI

        self.model = model
        self.base_urls = tuple(base_urls)
        self.settings = settings
        key = "unused"  # servers without authentication (memjax's, a local vLLM) ignore it
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env, "")
            if not key:
                raise ConfigError(
                    f"openai.api_key_env={settings.api_key_env!r}: that environment variable "
                    "is not set"
                )
        self._clients = [
            OpenAI(base_url=u, api_key=key, timeout=settings.timeout_s, max_retries=0)
            for u in self.base_urls
        ]
        self._next = 0
        self.cache = ResponseCache(settings.cache_dir) if settings.cache_dir else None
        self.sent = 0  # requests that reached the network (cache misses)
        self._pool = ThreadPoolExecutor(settings.max_concurrency, thread_name_prefix="openai")

    @classmethod
    def from_source(cls, source: str, settings: OpenAISettings) -> OpenAIModel:
        model, urls = parse_source(source)
        return cls(model, urls, settings)

    def chat(self, requests: Sequence[dict]) -> list[dict]:
        """Chat-completion replies ({"texts", "finish_reasons"}) to request bodies (each with
        messages and sampling settings; "model" is added), at most max_concurrency at once."""
        return list(self._pool.map(self._one, requests))

    def _one(self, body: dict) -> dict:
        request = {"model": self.model, **body}
        key = ResponseCache.key(request) if self.cache else ""
        if self.cache and (saved := self.cache.load(key)) is not None:
            return saved
        completion = self._send(request)
        reply = {
            "texts": [c.message.content or "" for c in completion.choices],
            "finish_reasons": [c.finish_reason for c in completion.choices],
        }
        if self.cache:
            self.cache.save(key, request, reply)
        return reply

    def _send(self, request: dict):
        import openai

        retryable = (
            openai.APIConnectionError,
            openai.RateLimitError,
            openai.InternalServerError,
        )
        body = dict(request)
        standard = {
            k: body.pop(k)
            for k in list(body)
            if k in ("model", "messages", "temperature", "top_p", "max_tokens", "stop", "n", "seed")
        }
        last = None
        for attempt in range(self.settings.max_retries + 1):
            client = self._clients[self._next % len(self._clients)]
            self._next += 1
            try:
                self.sent += 1
                return client.chat.completions.create(**standard, extra_body=body or None)
            except retryable as err:
                last = f"{client.base_url}: {type(err).__name__}: {err}"
            except openai.APIStatusError as err:
                raise RemoteModelError(
                    f"{client.base_url} refused a request for model {self.model!r}: "
                    f"HTTP {err.status_code}: {err.message}"
                ) from None
            if attempt < self.settings.max_retries:
                time.sleep(min(30.0, self.settings.backoff_s * 2**attempt))
        raise RemoteModelError(
            f"model {self.model!r}: no answer after {self.settings.max_retries + 1} tries; last: "
            f"{last}"
        )

    def chat_policy(self, max_tokens: int, temperature: float = 0.0, top_p: float = 1.0, seed=None):
        """A ChatPolicy (Memory-R1's roles, the judge, a chat teacher): messages -> texts."""
        sampling = {"temperature": temperature, "top_p": top_p, "max_tokens": int(max_tokens)}
        if seed is not None:
            sampling["seed"] = int(seed)

        def policy(batch: Sequence[Sequence[dict]]) -> list[str]:
            replies = self.chat([{"messages": list(m), **sampling} for m in batch])
            return [r["texts"][0] for r in replies]

        return policy


def default_config():
    """A config's `openai` section: how every `openai:` model source of the job is reached."""
    from ml_collections import ConfigDict

    return ConfigDict(dataclasses.asdict(OpenAISettings()))


_MODELS: dict[tuple, OpenAIModel] = {}


def shared_model(source: str, settings: OpenAISettings) -> OpenAIModel:
    """One client per (source, settings) in a process: roles that name the same endpoint share
    its connection pool and concurrency limit."""
    key = (str(source), settings)
    if key not in _MODELS:
        _MODELS[key] = OpenAIModel.from_source(source, settings)
    return _MODELS[key]
