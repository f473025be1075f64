"""Episodes as clients of the engine: each model call is a request, each search a tool job.

    runner = EngineRunner(engine, tokenizer, sampling, max_prompt_tokens=...)
    runner.drive(episodes, retriever, rng)

The lock-step driver (`advance`) waits for every live episode's call before any search runs,
and for every search before any next call. Here an episode moves on alone: when its completion
comes back it observes it at once; a search it asks for runs on a tool thread while the engine
goes on decoding the other episodes (its slot already serves another request), and its next
call joins the engine's queue when the passages come back.

An episode's k-th call draws from the key fold_in(fold_in(rng, episode index), k) at row 0, so
what an episode samples does not depend on which episodes run beside it or when its searches
return. Greedy calls give the lock-step `SamplerPolicy`'s outputs.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
from collections.abc import Sequence

import jax

from memjax.agents.episode import Episode, ModelCall, ModelOutput, SearchRequest
from memjax.agents.retrieval import Retriever
from memjax.agents.sampler_adapter import Sampled, prompt_ids, to_model_output
from memjax.engine import Engine, Request
from memjax.engine.requests import request_key
from memjax.sampling.sampling_params import SamplingParams


@dataclasses.dataclass
class _Client:
    index: int
    episode: Episode
    calls: int = 0  # model calls made so far (the next call's key)


@dataclasses.dataclass
class _Run:
    """One `drive` call's shared parts."""

    rng: jax.Array
    retriever: Retriever
    tools: futures.ThreadPoolExecutor
    searches: dict = dataclasses.field(default_factory=dict)  # Future -> _Client


class EngineRunner:
    """Drives episodes to their end over an engine and a retriever."""

    def __init__(
        self,
        engine: Engine,
        tokenizer,
        sampling: SamplingParams,
        *,
        extra_stop: Sequence[str] = (),
        max_prompt_tokens: int | None = None,
    ):
        self.engine = engine
        self.tokenizer = tokenizer
        self.sampling = sampling
        self.extra_stop = tuple(extra_stop)
        self.max_prompt_tokens = max_prompt_tokens
        self.overflows = 0  # calls refused because the prompt was over max_prompt_tokens
        self.eos_ids = tuple(tokenizer.eos_ids)

    def drive(self, episodes: Sequence[Episode], retriever: Retriever, rng: jax.Array) -> None:
        # One tool thread: searches run beside decoding, one at a time, so a retriever need
        # not be thread-safe.
        with futures.ThreadPoolExecutor(1, thread_name_prefix="memjax-tools") as tools:
            run = _Run(rng, retriever, tools)
            for i, episode in enumerate(episodes):
                self._next(_Client(i, episode), run)
            while self.engine.busy or run.searches:
                if self.engine.busy:
                    for _, completion in self.engine.step():
                        self._take(completion, run)
                    ready = [f for f in run.searches if f.done()]
                else:  # nothing to decode: wait for a search
                    ready, _ = futures.wait(run.searches, return_when=futures.FIRST_COMPLETED)
                for future in ready:
                    client = run.searches.pop(future)
                    self._then(client, client.episode.receive(future.result()[0]), run)

    def _take(self, completion, run: _Run) -> None:
        sampled = Sampled(
            tuple(completion.tokens), tuple(completion.logprobs), completion.stop_reason
        )
        client = completion.request.tag
        output = to_model_output(sampled, self.eos_ids, self.tokenizer)
        self._then(client, client.episode.observe(output), run)

    def _then(self, client: _Client, request: SearchRequest | None, run: _Run) -> None:
        """A search the episode asked for goes to the tool thread; else its next call (if it
        has one) goes to the engine."""
        if request is not None:
            run.searches[run.tools.submit(run.retriever.search, [request.query], request.k)] = (
                client
            )
        else:
            self._next(client, run)

    def _next(self, client: _Client, run: _Run) -> None:
        """Submits the episode's next call. A prompt over the budget is answered at once with
        an empty output that did not end (every agent treats it as a failed turn)."""
        if client.episode.done:
            return
        call: ModelCall = client.episode.current_call()
        prompt = prompt_ids(call, self.tokenizer)
        key = request_key(run.rng, client.index, client.calls)
        client.calls += 1
        if self.max_prompt_tokens is not None and len(prompt) > self.max_prompt_tokens:
            self.overflows += 1
            self._then(client, client.episode.observe(ModelOutput("", False, ())), run)
            return
        stops = tuple(dict.fromkeys(call.stop + self.extra_stop))
        self.engine.submit(Request(prompt, self.sampling, key, 0, stops, tag=client))
