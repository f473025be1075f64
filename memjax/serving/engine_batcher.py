"""Requests served by the continuous-batching engine: each joins the engine's slots as it
arrives, beside the requests already decoding, with no round to wait for.

    batcher = EngineBatcher(model, slots=8, max_len=2048, seed=0)
    choices = await batcher.submit(generation)        # from any request handler

A Generation with n choices is n engine Requests, rows 0..n-1 under one key: `jax.random.key
(seed)` when it names a seed (the key the lock-step path samples a seeded request with, so
both paths give it the same completions), else a fresh key per Generation from the server's
seed and a counter. The engine runs on its own thread (`memjax.engine.background`); handlers
await its futures, so the event loop keeps serving while the device decodes.
"""

from __future__ import annotations

import asyncio
import dataclasses

import jax

from memjax.engine import Engine, Request, RequestError
from memjax.engine.background import BackgroundEngine
from memjax.serving.errors import ApiError
from memjax.serving.generation import Choice, Generation, sampling_params, to_choice


def engine_requests(g: Generation, key) -> list[Request]:
    """The engine's requests for a Generation: one per choice, sharing the key, rows 0..n-1."""
    sampling = sampling_params(g.choice, g.max_tokens)
    return [Request(g.prompt, sampling, key=key, row=i, stop_strings=g.stop) for i in range(g.n)]


@dataclasses.dataclass
class EngineStats:
    requests: int = 0  # Generations submitted
    rows: int = 0  # engine requests (a Generation with n=2 is two)
    calls: int = 0  # the engine's decode calls
    decode_steps: int = 0  # tokens decoded per slot: fewer than the rows' tokens when they share


class EngineBatcher:
    """The same interface as the lock-step `Batcher`: `await submit(generation)`, `stats`,
    `close()`."""

    def __init__(self, model, *, slots: int, max_len: int, seed: int = 0):
        self.tokenizer = model.tokenizer
        self.engine = Engine(
            model.params,
            model.cfg,
            eos_ids=self.tokenizer.eos_ids,
            tokenizer=self.tokenizer,
            slots=slots,
            max_len=max_len,
        )
        self.max_len = self.engine.max_len  # at most the model's context
        self.front = BackgroundEngine(self.engine, name="memjax-serving-engine")
        self.key = jax.random.key(seed)
        self._requests = self._rows = self._unseeded = 0

    def key_for(self, g: Generation) -> jax.Array:
        if g.seed is not None:
            return jax.random.key(g.seed)
        self._unseeded += 1
        return jax.random.fold_in(self.key, self._unseeded)

    async def submit(self, generation: Generation) -> list[Choice]:
        requests = engine_requests(generation, self.key_for(generation))
        self._requests += 1
        self._rows += len(requests)
        futures = [asyncio.wrap_future(self.front.submit(r)) for r in requests]
        completions = await asyncio.gather(*futures, return_exceptions=True)
        for c in completions:  # every choice's error retrieved; the first one answers
            if isinstance(c, RequestError):  # the handlers' checks should have refused it first
                raise ApiError(400, str(c)) from c
            if isinstance(c, BaseException):
                raise c
        return [
            to_choice(c.tokens, c.logprobs, c.stop_reason, generation, self.tokenizer)
            for c in completions
        ]

    @property
    def stats(self) -> EngineStats:
        e = self.engine  # counters the engine's thread writes; reading them is enough here
        return EngineStats(self._requests, self._rows, e.decode_calls, e.decode_steps)

    def close(self) -> None:
        self.front.close()
