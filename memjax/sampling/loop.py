"""The device side of the sampler: one jitted prefill and one jitted decode loop.

    logits, cache = prefill(params, tokens, mask, positions, cache, ...)   # [B, V], cache
    result = decode(params, cache, logits, positions, key, eos, stops, ...) # a while_loop

`prefill` also serves continuation: it appends a left-padded chunk to a live cache and returns
the logits after each row's last token. `decode` samples a token from those logits, then loops
(feed the token, sample the next) inside `lax.while_loop` until every row has stopped or
`max_new_tokens` are out; the cache is donated, so XLA updates it in place.

The last token a row samples is never fed (its logits would go unused): it is returned as the
row's *pending* token, which a continuation feeds first.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import (
    CACHE_AXES,
    LAYER_CACHE_AXES,
    KVCache,
    init_cache,
    repeat_rows,
)
from memjax.parallel import constrain
from memjax.sampling.carry import DecodeCarry
from memjax.sampling.compaction import decode_compacting
from memjax.sampling.filters import choose_tokens
from memjax.sampling.sampling_params import SamplingParams

RUNNING, EOS, STOP_STRING = 0, 1, 2  # stop-reason codes; RUNNING at the end means max_tokens


def constrain_cache(cache: KVCache, mesh, rules) -> KVCache:
    """Batch over the data axes, kv heads over `tensor` (per the rules table)."""
    if mesh is None:
        return cache
    if cache.per_layer:
        kv = lambda a: constrain(a, LAYER_CACHE_AXES, mesh, rules)
    else:
        kv = lambda a: constrain(a, CACHE_AXES, mesh, rules)
    return KVCache(
        k=jax.tree.map(kv, cache.k),
        v=jax.tree.map(kv, cache.v),
        valid=constrain(cache.valid, ("batch", "cache_seq"), mesh, rules),
        index=cache.index,
    )


def _prefill(params, tokens, mask, positions, cache, *, cfg, group_size, mesh, rules, fresh=False):
    """Runs T tokens into the cache; returns the logits after each row's last token [B*G, V]
    and the cache with each row repeated `group_size` times (a GRPO group shares one prefill).

    tokens, positions: [B, T] int32 (left-padded); mask: [B, T] bool. A first prefill
    (`fresh`) runs the config's attention implementation (splash / cuDNN / XLA) over the
    prompt; with the XLA one it keeps the cached path, whose numbers it has always had.
    """
    cache = constrain_cache(cache, mesh, rules)
    fresh = fresh and decoder.fused_attention.resolve(cfg.attention, mesh) != "xla"
    hidden, cache = decoder.forward_hidden(
        params,
        tokens,
        positions,
        cfg,
        token_mask=mask,
        cache=cache,
        mesh=mesh,
        rules=rules,
        fresh_cache=fresh,
    )
    # Only the last position is sampled from: no [B, T, V] logits.
    logits = decoder.logits_from_hidden(params, hidden[:, -1:], cfg)[:, 0]  # [B, V]
    if group_size > 1:
        logits = jnp.repeat(logits, group_size, axis=0)
        cache = repeat_rows(cache, group_size)
    return logits, constrain_cache(cache, mesh, rules)


@partial(jax.jit, static_argnames=("cfg", "mesh", "rules"), donate_argnames=("cache",))
def prefill(params, tokens, mask, positions, cache, *, cfg, mesh=None, rules=None):
    """Appends a left-padded chunk to a live cache (donated, updated in place)."""
    return _prefill(
        params, tokens, mask, positions, cache, cfg=cfg, group_size=1, mesh=mesh, rules=rules
    )


@partial(jax.jit, static_argnames=("cfg", "group_size", "mesh", "rules"))
def prefill_into_groups(
    params, tokens, mask, positions, cache, *, cfg, group_size, mesh=None, rules=None
):
    """`prefill`, then every row repeated `group_size` times (a shared opening's cache widened
    into a group's rows). Not donated: the output has G times the input's rows, so XLA could
    not reuse the input's buffer and would only warn that it did not."""
    return _prefill(
        params,
        tokens,
        mask,
        positions,
        cache,
        cfg=cfg,
        group_size=group_size,
        mesh=mesh,
        rules=rules,
    )


@partial(
    jax.jit,
    static_argnames=("cfg", "group_size", "cache_size", "per_layer", "mesh", "rules"),
)
def prefill_new(
    params,
    tokens,
    mask,
    positions,
    *,
    cfg,
    cache_size,
    per_layer,
    group_size=1,
    mesh=None,
    rules=None,
):
    """Prefills prompts into a fresh cache of `cache_size` slots, made inside the jit (so its
    zeros are never materialised on the host, and a group can grow it to B*G rows)."""
    cache = init_cache(cfg, tokens.shape[0], cache_size, per_layer=per_layer)
    return _prefill(
        params,
        tokens,
        mask,
        positions,
        cache,
        cfg=cfg,
        group_size=group_size,
        mesh=mesh,
        rules=rules,
        fresh=True,
    )


@dataclasses.dataclass
class DecodeResult:
    tokens: jax.Array  # [B, max_new] int32, pad after a row stops
    logprobs: jax.Array  # [B, max_new] f32 at the sampling temperature, 0 after a row stops
    lengths: jax.Array  # [B] int32
    reason: jax.Array  # [B] int32: RUNNING (hit max_new), EOS or STOP_STRING
    pending: jax.Array  # [B] int32: each row's last sampled token, not yet in the cache
    pending_position: jax.Array  # [B] int32: its position
    cache: KVCache
    batch_sizes: tuple[int, ...]  # the batch the loop ran at, then each compacted bucket


def _matches_stop(window: jax.Array, stops: jax.Array) -> jax.Array:
    """window [B, W] (latest token last) vs stops [M, W] (right-aligned, -1 = any) -> [B]."""
    if stops.shape[0] == 0:
        return jnp.zeros(window.shape[0], jnp.bool_)
    equal = (window[:, None, :] == stops[None]) | (stops[None] < 0)  # [B, M, W]
    return jnp.any(jnp.all(equal, axis=-1), axis=-1)


def _record(c: DecodeCarry, token, logprob, eos_ids, stops, pad_id) -> DecodeCarry:
    """Stores the tokens sampled at `c.step` for rows still running and updates their stops."""
    live = ~c.done
    window = jnp.where(
        live[:, None], jnp.concatenate([c.window[:, 1:], token[:, None]], 1), c.window
    )
    is_eos = jnp.any(token[:, None] == eos_ids[None, :], axis=-1)
    is_stop = _matches_stop(window, stops)
    reason = jnp.where(live & is_eos, EOS, jnp.where(live & is_stop, STOP_STRING, c.reason))
    return dataclasses.replace(
        c,
        step=c.step + 1,
        token=jnp.where(live, token, c.token),
        tokens=c.tokens.at[:, c.step].set(jnp.where(live, token, pad_id)),
        logprobs=c.logprobs.at[:, c.step].set(jnp.where(live, logprob, 0.0)),
        window=window,
        done=c.done | (live & (is_eos | is_stop)),
        reason=reason,
    )


@partial(jax.jit, static_argnames=("sampling", "pad_id", "window"), donate_argnames=("cache",))
def _first_tokens(cache, logits, positions, key, eos_ids, stops, *, sampling, pad_id, window):
    """The carry after sampling every row's first token from the prefill's logits [B, V]."""
    B = logits.shape[0]
    rows = jnp.arange(B, dtype=jnp.int32)
    token, logprob = choose_tokens(logits, sampling, key, jnp.int32(0), rows)
    empty = DecodeCarry(
        step=jnp.int32(0),
        cache=cache,
        token=token,
        position=positions,
        rows=rows,
        tokens=jnp.full((B, sampling.max_new_tokens), pad_id, jnp.int32),
        logprobs=jnp.zeros((B, sampling.max_new_tokens), jnp.float32),
        window=jnp.full((B, window), -2, jnp.int32),  # -2: no token yet (never a stop id)
        done=jnp.zeros(B, jnp.bool_),
        reason=jnp.full(B, RUNNING, jnp.int32),
        lengths=jnp.ones(B, jnp.int32),
    )
    return _record(empty, token, logprob, eos_ids, stops, pad_id)


@partial(
    jax.jit,
    static_argnames=("cfg", "sampling", "pad_id", "stop_at_live", "mesh", "rules"),
    donate_argnames=("carry",),
)
def decode_steps(
    params,
    carry: DecodeCarry,
    key: jax.Array,
    eos_ids: jax.Array,  # [E] int32
    stops: jax.Array,  # [M, W] int32, see stops.stop_sequences
    *,
    cfg: DecoderConfig,
    sampling: SamplingParams,
    pad_id: int = 0,
    stop_at_live: int = 0,
    mesh=None,
    rules=None,
) -> DecodeCarry:
    """Feeds each row's last token and samples the next, in a `lax.while_loop`, until every row
    has stopped, `max_new_tokens` are out, or at most `stop_at_live` rows are still running
    (so the caller can move them into a smaller batch)."""

    def cond(c):
        running = jnp.sum(~c.done)
        return (c.step < sampling.max_new_tokens) & (running > stop_at_live)

    def body(c):
        # Rows that stopped still run (the batch is one shape) but their slots stay invalid.
        logits, cache = decoder.forward(
            params,
            c.token[:, None],
            c.position[:, None],
            cfg,
            token_mask=~c.done[:, None],
            cache=c.cache,
            mesh=mesh,
            rules=rules,
        )
        token, logprob = choose_tokens(logits[:, 0], sampling, key, c.step, c.rows)
        live = ~c.done
        c = dataclasses.replace(
            c,
            cache=constrain_cache(cache, mesh, rules),
            position=jnp.where(live, c.position + 1, c.position),
            lengths=c.lengths + live.astype(jnp.int32),
        )
        return _record(c, token, logprob, eos_ids, stops, pad_id)

    return jax.lax.while_loop(cond, body, carry)


def _result(carry: DecodeCarry, batch_sizes: tuple[int, ...]) -> DecodeResult:
    c = carry
    return DecodeResult(
        c.tokens, c.logprobs, c.lengths, c.reason, c.token, c.position, c.cache, batch_sizes
    )


def decode(
    params,
    cache: KVCache,
    logits: jax.Array,  # [B, V] f32: logits for each row's first new token
    positions: jax.Array,  # [B] int32: position of each row's first new token
    key: jax.Array,
    eos_ids: jax.Array,  # [E] int32
    stops: jax.Array,  # [M, W] int32, see stops.stop_sequences
    *,
    cfg: DecoderConfig,
    sampling: SamplingParams,
    pad_id: int = 0,
    compaction: bool = False,
    min_batch: int = 1,
    mesh=None,
    rules=None,
) -> DecodeResult:
    """Samples up to `max_new_tokens` per row. With `compaction`, the batch shrinks as rows
    stop (see compaction.py); rows come back in their original order either way."""
    carry = _first_tokens(
        cache,
        logits,
        positions,
        key,
        eos_ids,
        stops,
        sampling=sampling,
        pad_id=pad_id,
        window=stops.shape[1],
    )
    steps = partial(
        decode_steps,
        params,
        key=key,
        eos_ids=eos_ids,
        stops=stops,
        cfg=cfg,
        sampling=sampling,
        pad_id=pad_id,
        mesh=mesh,
        rules=rules,
    )
    if not compaction:
        return _result(steps(carry), (int(logits.shape[0]),))
    carry, sizes = decode_compacting(carry, steps, sampling.max_new_tokens, min_batch)
    return _result(carry, sizes)
