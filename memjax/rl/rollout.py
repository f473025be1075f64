"""The rollout loop over an environment, and the packing of its trajectories into a train batch.

    trajectories = run_episodes(env, examples, group_size, generate, rng)
    batch = pack(trajectories, seq_len, pad_id)       # numpy arrays [B, T]

`generate(prompts: list[list[int]], rng) -> list[Completion]` is the sampler (the trainer wraps
`memjax.sampling.sampler.sample`). Each turn, every unfinished episode's current context is sent
to the sampler as one prompt; completions go back to the environment, which ends the episode,
appends an observation, or starts a new context (see `memjax.rl.environment`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Sequence
from typing import Any

import jax
import numpy as np

from memjax.rl.environment import Environment


@dataclasses.dataclass
class Completion:
    tokens: list[int]  # generated ids, including a final EOS when the model emitted one
    logprobs: list[float]  # sampler log-probs of `tokens`, at the sampling temperature
    stop_reason: str = "eos"


@dataclasses.dataclass
class Context:
    """One training row: token ids, which ones are trainable, and their sampler log-probs."""

    tokens: list[int] = dataclasses.field(default_factory=list)
    trainable: list[bool] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)

    def extend(self, tokens: Sequence[int], trainable: bool, logprobs=None):
        self.tokens.extend(int(t) for t in tokens)
        self.trainable.extend([trainable] * len(tokens))
        self.logprobs.extend(list(logprobs) if logprobs is not None else [0.0] * len(tokens))


@dataclasses.dataclass
class Trajectory:
    group: int  # index of the example (the GRPO group)
    contexts: list[Context]
    reward: float = 0.0
    turns: int = 0
    completion_tokens: int = 0
    info: dict[str, float] = dataclasses.field(default_factory=dict)


Generate = Callable[[list[list[int]], jax.Array], list[Completion]]


def run_episodes(
    env: Environment,
    examples: Sequence[Any],
    group_size: int,
    generate: Generate,
    rng: jax.Array,
    eos_ids: Sequence[int] = (),
) -> list[Trajectory]:
    """G episodes per example, run turn by turn in lock-step batches. Returns N = len(examples)
    * G trajectories, ordered example by example (contiguous groups).

    The EOS token stays in the context as a trainable token (stopping is a decision the policy
    learns); the environment sees the completion without it."""
    eos = set(int(e) for e in eos_ids)
    trajs, states = start_episodes(env, examples, group_size)
    active = list(range(len(trajs)))
    for turn in range(env.max_turns):
        if not active:
            break
        prompts = [trajs[i].contexts[-1].tokens for i in active]
        outs = generate(prompts, jax.random.fold_in(rng, turn))
        still = []
        for i, out in zip(active, outs):
            states[i], done = take_turn(env, trajs[i], states[i], out, eos)
            if not done:
                still.append(i)
        active = still
    for i in active:  # cut off at max_turns
        truncate(env, trajs[i], states[i])
    return trajs


def start_episodes(
    env: Environment, examples: Sequence[Any], group_size: int
) -> tuple[list[Trajectory], list[Any]]:
    """G fresh episodes per example, example by example: their trajectories (one context
    holding the first prompt, untrained) and environment states."""
    trajs, states = [], []
    for g, example in enumerate(examples):
        for _ in range(group_size):
            state, prompt = env.reset(example)
            ctx = Context()
            ctx.extend(prompt, trainable=False)
            trajs.append(Trajectory(group=g, contexts=[ctx]))
            states.append(state)
    return trajs, states


def take_turn(
    env: Environment, tr: Trajectory, state: Any, out: Completion, eos: Container[int]
) -> tuple[Any, bool]:
    """One model turn of an episode: the completion joins the current context (trainable, EOS
    kept), the environment steps on it without the EOS, and its result ends the episode,
    opens a fresh context or appends an observation. Returns (new state, done)."""
    tr.contexts[-1].extend(out.tokens, trainable=True, logprobs=out.logprobs)
    tr.turns += 1
    tr.completion_tokens += len(out.tokens)
    text = list(out.tokens)
    if text and text[-1] in eos:
        text = text[:-1]
    state, res = env.step(state, text, out.stop_reason)
    for k, v in res.info.items():
        tr.info[k] = tr.info.get(k, 0.0) + float(v)
    if res.done:
        tr.reward = float(res.reward)
        return state, True
    if res.next_context is not None:
        ctx = Context()
        ctx.extend(res.next_context, trainable=False)
        tr.contexts.append(ctx)
    if res.observation:
        tr.contexts[-1].extend(res.observation, trainable=False)
    return state, False


def truncate(env: Environment, tr: Trajectory, state: Any) -> None:
    """An episode cut off at max_turns: the environment's truncated reward, counted in info."""
    tr.reward = float(env.truncated_reward(state))
    tr.info["truncated"] = 1.0


def pack(
    trajectories: Sequence[Trajectory],
    seq_len: int,
    pad_id: int = 0,
    row_multiple: int = 1,
) -> dict[str, np.ndarray]:
    """One row per context, right-padded to seq_len; rows padded (empty) to a multiple.

    Returns tokens, token_mask, loss_mask, sampler_logp [B, T] and trajectory [B] (index into
    `trajectories`, -1 for padding rows). A context longer than seq_len is cut (its tail loses
    training signal, counted in `truncated_rows`).
    """
    rows = [(i, c) for i, t in enumerate(trajectories) for c in t.contexts]
    B = -(-max(len(rows), 1) // row_multiple) * row_multiple
    tokens = np.full((B, seq_len), pad_id, np.int32)
    token_mask = np.zeros((B, seq_len), bool)
    loss_mask = np.zeros((B, seq_len), bool)
    logp = np.zeros((B, seq_len), np.float32)
    traj = np.full((B,), -1, np.int32)
    cut = 0
    for r, (i, c) in enumerate(rows):
        n = min(len(c.tokens), seq_len)
        cut += len(c.tokens) > seq_len
        tokens[r, :n] = c.tokens[:n]
        token_mask[r, :n] = True
        loss_mask[r, :n] = c.trainable[:n]
        logp[r, :n] = c.logprobs[:n]
        traj[r] = i
    return {
        "tokens": tokens,
        "token_mask": token_mask,
        "loss_mask": loss_mask,
        "sampler_logp": logp,
        "trajectory": traj,
        "truncated_rows": np.int32(cut),
    }


def run_in_waves(
    env: Environment,
    examples: Sequence[Any],
    group_size: int,
    generate: Generate,
    rng: jax.Array,
    eos_ids: Sequence[int] = (),
    wave_rows: int = 0,
) -> list[Trajectory]:
    """`run_episodes` over waves of at most `wave_rows` rows (whole groups; 0: one wave), so
    that the sampler's KV cache holds a wave, not the step. Trajectories keep the step's order
    and group numbers; one wave is exactly `run_episodes`."""
    per_wave = max(1, wave_rows // group_size) if wave_rows else len(examples)
    if per_wave >= len(examples):
        return run_episodes(env, examples, group_size, generate, rng, eos_ids)
    trajs = []
    for wave, start in enumerate(range(0, len(examples), per_wave)):
        part = examples[start : start + per_wave]
        key = jax.random.fold_in(rng, 1_000_003 + wave)  # apart from run_episodes' turn keys
        for t in run_episodes(env, part, group_size, generate, key, eos_ids):
            t.group += start
            trajs.append(t)
    return trajs


__all__ = [
    "Completion",
    "Context",
    "Trajectory",
    "Generate",
    "run_episodes",
    "run_in_waves",
    "pack",
    "start_episodes",
    "take_turn",
    "truncate",
]
