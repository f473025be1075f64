"""Choosing each row's token by the row's own settings: a slot batch mixes requests.

The same rule as `memjax.sampling.filters` (temperature -> top-k -> top-p, then a categorical
draw; log-probs at the temperature, before the filters), with each setting an array over rows
instead of one static value. A row's draw uses the same key as the lock-step sampler's
(`filters.row_keys`: the request's key folded with its step, then with its row id), so a
request samples the same tokens in any slot, beside any other requests, as it would alone.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

_NEG_INF = -jnp.inf


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class RowSettings:
    """Per row [B]: how its next token is chosen."""

    temperature: jax.Array  # f32, > 0
    top_k: jax.Array  # int32, 0 = off
    top_p: jax.Array  # f32, 1 = off
    greedy: jax.Array  # bool
    key: jax.Array  # uint32 [B, 2]: the request's key data
    row: jax.Array  # int32: the request's row id for its draws


def _top_k(logits: jax.Array, k: jax.Array) -> jax.Array:
    """logits [B, V], k [B]: below each row's k-th largest -> -inf (ties kept); k=0: none."""
    ordered = -jnp.sort(-logits, axis=-1)  # [B, V], largest first
    kth = jnp.take_along_axis(ordered, jnp.maximum(k - 1, 0)[:, None], axis=-1)  # [B, 1]
    return jnp.where((k[:, None] > 0) & (logits < kth), _NEG_INF, logits)


def _top_p(logits: jax.Array, p: jax.Array) -> jax.Array:
    """Nucleus filter with a threshold per row (p [B]; p >= 1 leaves the row untouched)."""
    order = jnp.argsort(-logits, axis=-1)  # [B, V]
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs
    drop_sorted = (mass_before >= p[:, None]) & (p[:, None] < 1.0)
    rows = jnp.arange(logits.shape[0])[:, None]
    drop = jnp.zeros_like(drop_sorted).at[rows, order].set(drop_sorted)
    return jnp.where(drop, _NEG_INF, logits)


def choose_rows(
    logits: jax.Array, settings: RowSettings, step: jax.Array, *, filtered: bool
) -> tuple[jax.Array, jax.Array]:
    """logits [B, V], step [B] (each request's count of tokens sampled so far) -> tokens [B]
    int32 and their log-probs [B] f32 at each row's temperature. `filtered` (static): some row
    uses top-k or top-p; without it the sort they need is not compiled in."""
    logits = logits.astype(jnp.float32)
    scaled = logits / settings.temperature[:, None]
    candidates = scaled
    if filtered:
        candidates = _top_p(_top_k(scaled, settings.top_k), settings.top_p)
    keys = jax.random.wrap_key_data(settings.key)  # [B] typed keys

    def draw(key, step, row, row_logits):
        key = jax.random.fold_in(jax.random.fold_in(key, step), row)
        return jax.random.categorical(key, row_logits)

    sampled = jax.vmap(draw)(keys, step, settings.row, candidates)
    tokens = jnp.where(settings.greedy, jnp.argmax(logits, axis=-1), sampled).astype(jnp.int32)
    logprobs = jax.nn.log_softmax(scaled, axis=-1)
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
