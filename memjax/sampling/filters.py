"""Choosing a token from logits: temperature -> top-k -> top-p, then a categorical draw.

All in f32. The reported log-prob of a token is log_softmax(logits / temperature) *before*
top-k / top-p: that is what a trainer recomputes from the same logits at the same temperature,
so rollout log-probs serve directly as PPO/GRPO old log-probs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.sampling.sampling_params import SamplingParams

_NEG_INF = -jnp.inf


def top_k_filter(logits: jax.Array, k: int) -> jax.Array:
    """Logits [B, V] with everything below the k-th largest set to -inf (ties at the k-th
    value are kept, as in `transformers`). k=0 or k >= V leaves them untouched."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = jax.lax.top_k(logits, k)[0][:, -1:]  # [B, 1]
    return jnp.where(logits < kth, _NEG_INF, logits)


def top_p_filter(logits: jax.Array, p: float) -> jax.Array:
    """Nucleus filter on logits [B, V]: keep the smallest set of most likely tokens whose mass
    reaches p, including the token that crosses p (as `transformers` does). p=1 is a no-op."""
    if p >= 1.0:
        return logits
    order = jnp.argsort(-logits, axis=-1)  # [B, V], most likely first
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs  # mass of strictly more likely tokens
    drop_sorted = mass_before >= p  # the first token always survives (mass_before = 0)
    drop = (
        jnp.zeros_like(drop_sorted).at[jnp.arange(logits.shape[0])[:, None], order].set(drop_sorted)
    )
    return jnp.where(drop, _NEG_INF, logits)


def filtered_logits(logits: jax.Array, sampling: SamplingParams) -> jax.Array:
    """[B, V] f32 logits of the distribution that is actually sampled from."""
    scaled = logits.astype(jnp.float32) / sampling.temperature
    return top_p_filter(top_k_filter(scaled, sampling.top_k), sampling.top_p)


def row_keys(key: jax.Array, step: jax.Array, rows: jax.Array) -> jax.Array:
    """One key per (step, row id) for rows [B] int32 (each row's index in the call's output):
    a row's draws do not depend on which rows share its batch, so group-shared and separate
    prefills, sharded and single-device runs, and batches compacted as rows finish, draw alike."""
    step_key = jax.random.fold_in(key, step)
    return jax.vmap(lambda r: jax.random.fold_in(step_key, r))(rows)


def choose_tokens(
    logits: jax.Array,
    sampling: SamplingParams,
    key: jax.Array,
    step: jax.Array,
    rows: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
    """logits [B, V] -> (tokens [B] int32, log-probs [B] f32 at the sampling temperature).
    rows [B] int32: the rows' ids for their draws (default 0..B-1)."""
    logits = logits.astype(jnp.float32)
    if sampling.greedy:
        tokens = jnp.argmax(logits, axis=-1)
    else:
        if rows is None:
            rows = jnp.arange(logits.shape[0], dtype=jnp.int32)
        keys = row_keys(key, step, rows)
        tokens = jax.vmap(jax.random.categorical)(keys, filtered_logits(logits, sampling))
    tokens = tokens.astype(jnp.int32)
    logprobs = jax.nn.log_softmax(logits / sampling.temperature, axis=-1)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
