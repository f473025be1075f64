"""What a client hands the engine, and what it gets back."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax

from memjax.sampling.sampling_params import SamplingParams

EOS, STOP_STRING, MAX_TOKENS = "eos", "stop_string", "max_tokens"


def request_key(rng: jax.Array, client: int, call: int) -> jax.Array:
    """The key of a client's call-th request (an episode's or trajectory's turn): from the
    run's key, the client's index and the call only, so what a client samples depends on
    nothing the schedule decides (slots, neighbours, arrival order)."""
    return jax.random.fold_in(jax.random.fold_in(rng, client), call)


class RequestError(ValueError):
    """A request the engine cannot serve (too long for its slots, no tokens)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Request:
    """A prompt and how to sample its completion.

    `key` and `row` fix the request's draws: the sampler's row `row` of a call with key `key`
    draws the same tokens (`token_choice`). `sampling`'s token choice (temperature, top_k,
    top_p, greedy, max_new_tokens) is the request's own; its run options do not apply.
    """

    prompt: Sequence[int]
    sampling: SamplingParams
    key: jax.Array | int = 0
    row: int = 0
    stop_strings: tuple[str, ...] = ()
    tag: object = None  # the client's own handle, returned with the completion


@dataclasses.dataclass
class Completion:
    request: Request
    tokens: list[int]  # sampled ids, a final EOS or stop string included
    logprobs: list[float]  # at the request's temperature, one per token
    stop_reason: str  # EOS, STOP_STRING or MAX_TOKENS
