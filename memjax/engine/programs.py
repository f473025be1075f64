"""The engine's compiled programs: a prompt chunk into one slot, and decode steps over all.

    cache, logits = prefill_slot(params, cache, slot, tokens, start, last, cfg=..., window=W)
    cache, slots, out = decode(params, cache, slots, eos_ids, cfg=..., window=W, steps=N, ...)

Shapes are bucketed by the caller (chunk lengths, windows), so a run compiles a fixed set of
these. Both donate the cache: XLA writes it in place. `mesh` and `rules` (optional) lay out the
activations under the sampling rules and run the decode kernels per device (`slot_attention`);
the cache and weights come in already sharded.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from memjax.engine.token_choice import RowSettings, choose_rows
from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.slot_cache import SlotCache, forward_slots, put_slot, take_slot


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class SlotState:
    """Per slot [B]: where its request stands."""

    token: jax.Array  # int32: the last sampled token, not yet fed (its pending token)
    length: jax.Array  # int32: tokens in the slot's cache, the pending token's position
    live: jax.Array  # bool: decoding (not empty, not prefilling, not finished)
    produced: jax.Array  # int32: tokens the request has sampled
    limit: jax.Array  # int32: its max_new_tokens
    settings: RowSettings


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DecodeOut:
    tokens: jax.Array  # [B, steps] int32, -1 where a row sampled nothing
    logprobs: jax.Array  # [B, steps] f32
    steps: jax.Array  # [] int32: steps run (the loop stops early when a row ends)


@partial(jax.jit, static_argnames=("cfg", "window", "mesh", "rules"), donate_argnames=("cache",))
def prefill_slot(
    params,
    cache: SlotCache,
    slot: jax.Array,  # [] int32
    tokens: jax.Array,  # [1, T] int32, the chunk right-padded to its bucket
    start: jax.Array,  # [] int32: the chunk's first position (tokens already in the slot)
    last: jax.Array,  # [] int32: index in the chunk of its last real token
    *,
    cfg: DecoderConfig,
    window: int,
    mesh=None,
    rules=None,
) -> tuple[SlotCache, jax.Array]:
    """Writes a chunk of one request's prompt into its slot; returns the cache and the logits
    after the chunk's last real token [V] (f32). Pad tokens after it are written past the
    prompt, where the request's own tokens overwrite them before anything attends to them."""
    if mesh is None:  # the chunk written straight into the slot's row, in place
        hidden, cache = forward_slots(
            params, tokens, start[None], cfg, cache, window, rows=slot[None]
        )
    else:
        # Rows split over devices: a row taken out at a traced index would make the compiler
        # gather the whole cache; take_slot's masked sum moves one row instead.
        row = take_slot(cache, slot, sharded=True)
        hidden, row = forward_slots(
            params, tokens, start[None], cfg, row, window, mesh=mesh, rules=rules
        )
        cache = put_slot(cache, row, slot)
    last_hidden = jax.lax.dynamic_slice_in_dim(hidden, last, 1, axis=1)  # [1, 1, D]
    return cache, decoder.logits_from_hidden(params, last_hidden, cfg)[0, 0]


@partial(jax.jit, static_argnames=("filtered",))
def first_token(logits, settings: RowSettings, *, filtered: bool):
    """A request's first token from its prompt's last logits [V] (its step 0)."""
    tokens, logprobs = choose_rows(
        logits[None], settings, jnp.zeros(1, jnp.int32), filtered=filtered
    )
    return tokens[0], logprobs[0]


@partial(
    jax.jit,
    static_argnames=("cfg", "window", "steps", "filtered", "mesh", "rules"),
    donate_argnames=("cache",),
)
def decode(
    params,
    cache: SlotCache,
    state: SlotState,
    eos_ids: jax.Array,  # [E] int32
    *,
    cfg: DecoderConfig,
    window: int,
    steps: int,
    filtered: bool,
    mesh=None,
    rules=None,
) -> tuple[SlotCache, SlotState, DecodeOut]:
    """Up to `steps` decode steps over every slot: live rows feed their pending token and
    sample the next. Stops early after a step in which a row ended (EOS or its limit), so the
    caller can hand the slot to a waiting request at once."""
    B = state.token.shape[0]

    def cond(c):
        i, _, s, _, _, ended = c
        return (i < steps) & ~ended & jnp.any(s.live)

    def body(c):
        i, cache, s, tokens, logprobs, _ = c
        hidden, cache = forward_slots(
            params, s.token[:, None], s.length, cfg, cache, window, mesh=mesh, rules=rules
        )
        logits = decoder.logits_from_hidden(params, hidden, cfg)[:, 0]  # [B, V]
        token, logprob = choose_rows(logits, s.settings, s.produced, filtered=filtered)
        live = s.live
        produced = s.produced + live
        is_eos = jnp.any(token[:, None] == eos_ids[None, :], axis=-1)
        ends = live & (is_eos | (produced >= s.limit))
        s = dataclasses.replace(
            s,
            token=jnp.where(live, token, s.token),
            length=s.length + live,
            live=live & ~ends,
            produced=produced,
        )
        tokens = tokens.at[:, i].set(jnp.where(live, token, -1))
        logprobs = logprobs.at[:, i].set(jnp.where(live, logprob, 0.0))
        return i + 1, cache, s, tokens, logprobs, jnp.any(ends)

    init = (
        jnp.int32(0),
        cache,
        state,
        jnp.full((B, steps), -1, jnp.int32),
        jnp.zeros((B, steps), jnp.float32),
        jnp.bool_(False),
    )
    n, cache, state, tokens, logprobs, _ = jax.lax.while_loop(cond, body, init)
    return cache, state, DecodeOut(tokens, logprobs, n)


@partial(jax.jit, static_argnames=("size",))
def read_block(cache: SlotCache, slot: jax.Array, start: jax.Array, *, size: int):
    """Slots [start, start + size) of `slot`'s row: per layer ([1, K, size, Hd] k, v)."""
    axis = 0 if cache.per_layer else 1
    take = lambda a: jax.lax.dynamic_slice_in_dim(
        jax.lax.dynamic_slice_in_dim(a, slot, 1, axis=axis), start, size, axis=axis + 2
    )
    return jax.tree.map(take, cache.k), jax.tree.map(take, cache.v)


@partial(jax.jit, donate_argnames=("cache",))
def write_block(cache: SlotCache, block, slot: jax.Array, start: jax.Array) -> SlotCache:
    """`cache` with a stored block (`read_block`'s output) written at `slot`, `start`: a write
    alone, so XLA does it in place."""
    axis = 0 if cache.per_layer else 1

    def put(a, b):
        at = [jnp.int32(0)] * a.ndim
        at[axis], at[axis + 2] = slot, start
        return jax.lax.dynamic_update_slice(a, b, at)

    k, v = block
    return SlotCache(jax.tree.map(put, cache.k, k), jax.tree.map(put, cache.v, v))
