"""Rollouts on the continuous-batching engine: every trajectory is a client of its own.

    engine = Engine(params, cfg, eos_ids=eos_ids, tokenizer=tok, slots=8, max_len=seq_len)
    trajectories = run_on_engine(env, examples, group_size, engine, sampling, rng)

The same episodes as `rollout.run_episodes` (the same `start_episodes` / `take_turn` /
`truncate` bookkeeping, the same `Trajectory` list in the same order), scheduled differently:
a trajectory's current context goes to the engine as one request, and as soon as its completion
comes back the environment steps and the next turn is submitted, while the other trajectories
keep decoding. A lock-step turn waits for its longest completion; here a short episode never
waits for a long one.

Each request's key is the rollout key folded with the trajectory's index, then with its turn
(row 0): its draws depend on nothing the schedule decides (slots, neighbours, arrival order), so
the trajectories do not depend on the engine's slot count, and a resumed run redraws the same
rollouts. Greedy turns are the lock-step sampler's tokens.

A request the engine refuses (its context plus max_new_tokens does not fit the engine's
max_len) ends its turn with an empty "max_tokens" completion, counted in the trajectory's
`info["refused"]`: the environment scores it as a turn that hit the token limit, and the run
goes on. With `SamplingParams.context_overflow="truncate_prompt"` the request keeps the
context's latest tokens that fit instead, as the sampler does at the model's window; the
trajectory's context stays whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from memjax.engine import Engine, Request, RequestError
from memjax.engine.requests import request_key
from memjax.rl.environment import Environment
from memjax.rl.rollout import Completion, Trajectory, start_episodes, take_turn, truncate
from memjax.sampling.context import TRUNCATE_PROMPT
from memjax.sampling.sampling_params import SamplingParams

REFUSED = "refused"  # the info key counting a trajectory's turns the engine refused


def _typed_key(rng) -> jax.Array:
    """A typed key (the engine reads its data) from a typed key, a raw uint32 one or a seed."""
    if isinstance(rng, int):
        return jax.random.key(rng)
    if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key):
        return rng
    return jax.random.wrap_key_data(rng)


def run_on_engine(
    env: Environment,
    examples: Sequence[Any],
    group_size: int,
    engine: Engine,
    sampling: SamplingParams,
    rng: jax.Array,
    *,
    stop_strings: Sequence[str] = (),
) -> list[Trajectory]:
    """G episodes per example on `engine`, each turn submitted as soon as the previous one
    ends. Returns N = len(examples) * G trajectories, example by example (contiguous groups),
    as `rollout.run_episodes` does."""
    stops = tuple(stop_strings)
    if stops and engine.tokenizer is None:
        # The engine would refuse every request; that is a setup error, not a long context.
        raise ValueError(f"stop_strings {stops} need an engine with a tokenizer")
    rng = _typed_key(rng)
    trajs, states = start_episodes(env, examples, group_size)
    eos = engine.eos_set
    room = engine.max_len - sampling.max_new_tokens  # prompt tokens that fit beside the new

    def serve(i: int) -> None:
        """Submits trajectory i's next turn; takes refused turns at once, and ends the episode
        at max_turns."""
        tr = trajs[i]
        while tr.turns < env.max_turns:
            prompt = tuple(tr.contexts[-1].tokens)  # the context grows; the request keeps this
            if sampling.context_overflow == TRUNCATE_PROMPT and 0 < room < len(prompt):
                prompt = prompt[len(prompt) - room :]
            key = request_key(rng, i, tr.turns)
            try:
                engine.submit(Request(prompt, sampling, key=key, stop_strings=stops, tag=i))
                return
            except RequestError:
                tr.info[REFUSED] = tr.info.get(REFUSED, 0.0) + 1.0
                states[i], done = take_turn(
                    env, tr, states[i], Completion([], [], "max_tokens"), eos
                )
                if done:
                    return
        truncate(env, tr, states[i])

    for i in range(len(trajs)):
        serve(i)
    while engine.busy:
        for _, out in engine.step():
            i = out.request.tag
            completion = Completion(list(out.tokens), list(out.logprobs), out.stop_reason)
            states[i], done = take_turn(env, trajs[i], states[i], completion, eos)
            if not done:
                serve(i)
    return trajs


__all__ = ["run_on_engine", "request_key", "REFUSED"]
