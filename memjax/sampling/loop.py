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
from memjax.models.kv_cache import CACHE_AXES, LAYER_CACHE_AXES, KVCache, init_cache, repeat_rows
from memjax.parallel import constrain
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


@partial(
    jax.jit, static_argnames=("cfg", "group_size", "mesh", "rules"), donate_argnames=("cache",)
)
def prefill(params, tokens, mask, positions, cache, *, cfg, group_size=1, mesh=None, rules=None):
    """Appends a left-padded chunk to a live cache (donated, updated in place)."""
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


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DecodeResult:
    tokens: jax.Array  # [B, max_new] int32, pad after a row stops
    logprobs: jax.Array  # [B, max_new] f32 at the sampling temperature, 0 after a row stops
    lengths: jax.Array  # [B] int32
    reason: jax.Array  # [B] int32: RUNNING (hit max_new), EOS or STOP_STRING
    pending: jax.Array  # [B] int32: each row's last sampled token, not yet in the cache
    pending_position: jax.Array  # [B] int32: its position
    cache: KVCache


def _matches_stop(window: jax.Array, stops: jax.Array) -> jax.Array:
    """window [B, W] (latest token last) vs stops [M, W] (right-aligned, -1 = any) -> [B]."""
    if stops.shape[0] == 0:
        return jnp.zeros(window.shape[0], jnp.bool_)
    equal = (window[:, None, :] == stops[None]) | (stops[None] < 0)  # [B, M, W]
    return jnp.any(jnp.all(equal, axis=-1), axis=-1)


@partial(
    jax.jit,
    static_argnames=("cfg", "sampling", "pad_id", "mesh", "rules"),
    donate_argnames=("cache",),
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
    mesh=None,
    rules=None,
) -> DecodeResult:
    B = logits.shape[0]
    max_new = sampling.max_new_tokens
    W = stops.shape[1]

    def record(step, token, logprob, state):
        """Stores the token sampled at `step` for rows still running and updates stops."""
        out_tokens, out_logprobs, window, done, reason = state
        live = ~done
        out_tokens = out_tokens.at[:, step].set(jnp.where(live, token, pad_id))
        out_logprobs = out_logprobs.at[:, step].set(jnp.where(live, logprob, 0.0))
        window = jnp.where(
            live[:, None], jnp.concatenate([window[:, 1:], token[:, None]], 1), window
        )
        is_eos = jnp.any(token[:, None] == eos_ids[None, :], axis=-1)
        is_stop = _matches_stop(window, stops)
        reason = jnp.where(live & is_eos, EOS, jnp.where(live & is_stop, STOP_STRING, reason))
        return out_tokens, out_logprobs, window, done | (live & (is_eos | is_stop)), reason

    token, logprob = choose_tokens(logits, sampling, key, jnp.int32(0))
    init = (
        jnp.full((B, max_new), pad_id, jnp.int32),
        jnp.zeros((B, max_new), jnp.float32),
        jnp.full((B, W), -2, jnp.int32),  # -2: no token yet (never equals a stop id)
        jnp.zeros(B, jnp.bool_),
        jnp.full(B, RUNNING, jnp.int32),
    )
    state = record(0, token, logprob, init)
    lengths = jnp.ones(B, jnp.int32)

    def cond(carry):
        step, _, _, _, _, state, _ = carry
        return (step < max_new) & ~jnp.all(state[3])

    def body(carry):
        step, cache, token, position, rng, state, lengths = carry
        done = state[3]
        # Rows that stopped still run (the batch is one shape) but their slots stay invalid.
        logits, cache = decoder.forward(
            params,
            token[:, None],
            position[:, None],
            cfg,
            token_mask=~done[:, None],
            cache=cache,
            mesh=mesh,
            rules=rules,
        )
        new_token, logprob = choose_tokens(logits[:, 0], sampling, rng, step)
        state = record(step, new_token, logprob, state)
        token = jnp.where(done, token, new_token)
        position = jnp.where(done, position, position + 1)
        lengths = lengths + (~done).astype(jnp.int32)
        return step + 1, constrain_cache(cache, mesh, rules), token, position, rng, state, lengths

    carry = (jnp.int32(1), cache, token, positions, key, state, lengths)
    _, cache, token, position, _, state, lengths = jax.lax.while_loop(cond, body, carry)
    out_tokens, out_logprobs, _, _, reason = state
    return DecodeResult(out_tokens, out_logprobs, lengths, reason, token, position, cache)
