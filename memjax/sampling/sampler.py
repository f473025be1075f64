"""The sampler's public API: token ids in, completions and log-probs out, and continuation.

    out = sample(params, cfg, prompts, SamplingParams(max_new_tokens=64), rng,
                 eos_ids=tok.eos_ids, group_size=G)
    out.tokens, out.logprobs, out.lengths, out.stop_reason       # rows [p0 g0, p0 g1, ..., p1 g0]
    out2 = continue_(out.state, [tool_response_ids, ...], sampling, rng2)   # no re-prefill

Prompts are left-padded into length buckets (`padding.bucket_length`) and prefilled once per
prompt (a GRPO group shares it); decoding runs in one jitted `lax.while_loop` over a donated KV cache (see loop.py).
On CPU the layers are unrolled over per-layer weights (`prepare_params`), which decodes about
twice as fast as `lax.scan` there; pass prepared params to avoid redoing that per call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import KVCache
from memjax.models.params import tree_map_info
from memjax.parallel import SAMPLING_RULES, named_sharding, normalize_rules
from memjax.sampling import loop, weights
from memjax.sampling.chunk import column_chunks
from memjax.sampling.context import check_continuation, fit_prompts
from memjax.sampling.padding import bucket_length, cache_length, left_pad, positions_after
from memjax.sampling.prefix import rest_length, shared_prefix_length
from memjax.sampling.sampling_params import SamplingParams, compacts, prefill_chunk
from memjax.sampling.stops import first_stop_string_end, stop_sequences

REASONS = {loop.RUNNING: "max_tokens", loop.EOS: "eos", loop.STOP_STRING: "stop_string"}


@dataclasses.dataclass
class SampleState:
    """What a continuation needs: the live cache, each row's pending token (its last sampled
    token, not yet fed) and that token's position, the token history, and the call's settings
    (so `continue_(state, chunks, sampling, rng)` needs nothing else)."""

    cache: KVCache | None  # None before the first prefill
    pending: jax.Array  # [N] int32
    pending_position: jax.Array  # [N] int32
    history: list[list[int]]  # per row: every token so far (prompt, completions, chunks)
    params: object
    cfg: DecoderConfig
    eos_ids: tuple[int, ...]
    stop_strings: tuple[str, ...]
    tokenizer: object | None
    pad_id: int
    mesh: object | None
    rules: object | None


@dataclasses.dataclass
class SampleOutput:
    tokens: np.ndarray  # [N, max_new] int32, pad_id after each row's end
    logprobs: np.ndarray  # [N, max_new] f32 at the sampling temperature, 0 after the end
    lengths: np.ndarray  # [N] int32: tokens produced (the EOS / stop string included)
    stop_reason: list[str]  # per row: "eos" | "stop_string" | "max_tokens"
    state: SampleState
    batch_sizes: tuple[int, ...] = ()  # the decode batch, then each compacted bucket

    def completions(self) -> list[list[int]]:
        return [self.tokens[i, : self.lengths[i]].tolist() for i in range(len(self.lengths))]


def prepare_params(params, cfg: DecoderConfig, *, weight_dtype=None, mesh=None, rules=None):
    """Parameters laid out for decoding: per-layer (unrolled) on CPU, stacked elsewhere, the
    weight matrices in `weight_dtype` (None keeps them as stored), and sharded for sampling
    when a mesh is given (tensor-parallel only by default)."""
    if jax.default_backend() == "cpu":
        params = decoder.unstack_layers(params)
    if weight_dtype is not None:
        params = weights.cast_matrices(params, weight_dtype)
    if mesh is not None:
        params = jax.device_put(params, _param_shardings(params, cfg, mesh, rules))
    return params


def _param_shardings(params, cfg, mesh, rules):
    rules = normalize_rules(rules if rules is not None else SAMPLING_RULES)
    abstract = decoder.decoder_abstract(cfg)
    shard = lambda info: named_sharding(mesh, rules, info.logical_axes, info.shape)
    out = tree_map_info(shard, {k: v for k, v in abstract.items() if k != "layers"})
    layer = lambda info: named_sharding(mesh, rules, info.logical_axes[1:], info.shape[1:])
    if isinstance(params["layers"], (list, tuple)):
        out["layers"] = [tree_map_info(layer, abstract["layers"])] * len(params["layers"])
    else:
        out["layers"] = tree_map_info(shard, abstract["layers"])
    return out


def _key(rng) -> jax.Array:
    if isinstance(rng, int):
        return jax.random.key(rng)
    return rng


def _stop_arrays(eos_ids, stop_strings, tokenizer):
    if stop_strings and tokenizer is None:
        raise ValueError("stop_strings need a tokenizer (to spell and to find them)")
    eos = np.asarray(sorted(set(int(e) for e in eos_ids)) or [-1], np.int32)
    stops = stop_sequences(stop_strings, tokenizer) if stop_strings else np.zeros((0, 1), np.int32)
    return jnp.asarray(eos), jnp.asarray(stops)


def _finish(result: loop.DecodeResult, state: SampleState, sampling: SamplingParams):
    """Device result -> SampleOutput; cuts rows exactly at stop strings the device missed."""
    tokens = np.array(result.tokens)
    logprobs = np.array(result.logprobs)
    lengths = np.array(result.lengths)
    reasons = [REASONS[int(r)] for r in np.asarray(result.reason)]
    pending = np.array(result.pending)
    pending_position = np.array(result.pending_position)
    cache = result.cache
    # Token j of a row sits in cache slot first_slot + j (the last token of a row is pending,
    # not in the cache); the loop ran max(lengths) steps and fed all but the last token.
    first_slot = int(cache.index) - (int(lengths.max()) - 1)
    if state.stop_strings:
        valid = None
        for i in range(len(lengths)):
            # EOS rows too: a stop string spelled in an unusual way may come before the EOS.
            hit = first_stop_string_end(
                tokens[i, : lengths[i]], state.stop_strings, state.tokenizer
            )
            if hit is None:
                continue
            if hit[0] == lengths[i]:
                if reasons[i] != "eos":
                    reasons[i] = "stop_string"
                continue
            n = hit[0]
            # Token n-1 becomes the pending token: its slot and all later ones are dropped.
            pending_position[i] -= lengths[i] - n
            pending[i] = tokens[i, n - 1]
            if valid is None:
                valid = np.array(cache.valid)
            valid[i, first_slot + n - 1 :] = False
            tokens[i, n:] = state.pad_id
            logprobs[i, n:] = 0.0
            lengths[i] = n
            reasons[i] = "stop_string"
        if valid is not None:
            cache = dataclasses.replace(cache, valid=jnp.asarray(valid))
    history = [h + tokens[i, : lengths[i]].tolist() for i, h in enumerate(state.history)]
    new_state = dataclasses.replace(
        state,
        cache=cache,
        pending=jnp.asarray(pending),
        pending_position=jnp.asarray(pending_position),
        history=history,
    )
    return SampleOutput(tokens, logprobs, lengths, reasons, new_state, result.batch_sizes)


def _run(state: SampleState, chunks, starts, sampling, rng, group_size, pad_to=bucket_length):
    """Prefill `chunks` (one per cache row before grouping) at `starts`, left-padded to
    `pad_to(longest)`, then decode."""
    state = dataclasses.replace(
        state,
        params=weights.cast_matrices(
            state.params, weights.resolve(sampling, len(chunks) * group_size)
        ),
    )
    length = pad_to(max(len(c) for c in chunks))
    tokens, mask = left_pad(chunks, length, state.pad_id)
    positions = positions_after(mask, np.asarray(starts))
    rules = normalize_rules(state.rules) if state.rules is not None else None
    inputs = (tokens, mask, positions)  # host arrays: each chunk is cut before it is sent
    room = length + sampling.max_new_tokens  # cache slots these rows need past the live ones
    logits, cache = _prefill_in_chunks(state, inputs, room, group_size, rules, sampling)
    eos, stops = _stop_arrays(state.eos_ids, state.stop_strings, state.tokenizer)
    first_positions = np.repeat(positions[:, -1] + 1, group_size)
    result = loop.decode(
        state.params,
        cache,
        logits,
        jnp.asarray(first_positions),
        _key(rng),
        eos,
        stops,
        cfg=state.cfg,
        sampling=sampling.token_choice(),
        pad_id=state.pad_id,
        compaction=compacts(sampling, jax.default_backend(), state.mesh is not None),
        min_batch=weights.min_batch(state.params),
        mesh=state.mesh,
        rules=rules,
    )
    return _finish(result, state, sampling)


def _prefill_in_chunks(state: SampleState, inputs, room: int, group_size: int, rules, sampling):
    """`_prefill_rows` over column chunks (`sampling`'s prefill chunk, chunk.py) of the host
    arrays `inputs` (tokens, mask, positions), each chunk sent to the device as it is cut:
    every chunk but the last goes into the cache without grouping; the last returns the
    logits and widens the rows into groups."""
    chunk = prefill_chunk(sampling, jax.default_backend())
    *leading, last = column_chunks(inputs[0].shape[1], chunk)

    def columns(piece: slice) -> list:
        return [jnp.asarray(x[:, piece]) for x in inputs]

    for piece in leading:
        _, cache = _prefill_rows(state, columns(piece), room, 1, rules)
        state = dataclasses.replace(state, cache=cache)
        room -= piece.stop - piece.start  # slots still needed past the live ones
    return _prefill_rows(state, columns(last), room, group_size, rules)


def _prefill_rows(state: SampleState, inputs, room: int, group_size: int, rules):
    """The prefill of left-padded (tokens, mask, positions) [R, T] into a new cache, or after
    the live cache's rows (grown to hold `room` more slots); each row then repeated
    `group_size` times. Returns the last logits [R * G, V] and the cache."""
    model = dict(cfg=state.cfg, mesh=state.mesh, rules=rules)
    if state.cache is None:
        per_layer = isinstance(state.params["layers"], (list, tuple))
        return loop.prefill_new(
            state.params,
            *inputs,
            cache_size=cache_length(room),
            per_layer=per_layer,
            group_size=group_size,
            **model,
        )
    cache = state.cache
    needed = int(cache.index) + room
    if needed > cache.size:
        cache = grow_cache(cache, cache_length(needed))
    if group_size == 1:  # the live cache is donated and updated in place
        return loop.prefill(state.params, *inputs, cache, **model)
    return loop.prefill_into_groups(state.params, *inputs, cache, group_size=group_size, **model)


def _prefill_shared(state: SampleState, prefix, rows: int, room: int) -> SampleState:
    """`prefix` (the rows' common opening, whole blocks, no padding) prefilled once and its
    cache copied to `rows` rows, with `room` more slots for each row's rest and completion."""
    tokens = jnp.asarray([prefix], jnp.int32)  # [1, P]
    positions = jnp.arange(len(prefix), dtype=jnp.int32)[None]
    per_layer = isinstance(state.params["layers"], (list, tuple))
    _, cache = loop.prefill_new(
        state.params,
        tokens,
        jnp.ones_like(tokens, bool),
        positions,
        cfg=state.cfg,
        cache_size=cache_length(len(prefix) + room),
        per_layer=per_layer,
        group_size=rows,
    )
    return dataclasses.replace(state, cache=cache)


def grow_cache(cache: KVCache, size: int) -> KVCache:
    """The same cache with `size` slots (new slots empty and invalid)."""
    extra = size - cache.size
    axis = 2 if cache.per_layer else 3
    pad = lambda a: jnp.pad(a, [(0, extra) if d == axis else (0, 0) for d in range(a.ndim)])
    return KVCache(
        k=jax.tree.map(pad, cache.k),
        v=jax.tree.map(pad, cache.v),
        valid=jnp.pad(cache.valid, [(0, 0), (0, extra)]),
        index=cache.index,
    )


def sample(
    params,
    cfg: DecoderConfig,
    prompts: Sequence[Sequence[int]],
    sampling: SamplingParams,
    rng,
    *,
    eos_ids: Sequence[int],
    stop_strings: Sequence[str] = (),
    tokenizer=None,
    group_size: int = 1,
    pad_id: int = 0,
    mesh=None,
    rules=None,
) -> SampleOutput:
    """Samples `group_size` completions for every prompt (token ids, no padding).

    Rows come out as [p0 g0, p0 g1, ..., p1 g0, ...]. Each prompt is prefilled once and its
    cache shared by its group. `rng` is a JAX key (or an int seed); a row's draws depend only on
    the key, the step and the row's index. With `mesh`, weights are tensor-parallel
    (`rules`, default SAMPLING_RULES) and the batch is split over the data axes. Without a
    mesh, an opening all prompts share (`sampling.shared_prefix` tokens or more) is prefilled
    once (prefix.py).
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("sample() needs at least one prompt, and every prompt needs a token")
    if group_size < 1:
        raise ValueError(f"group_size={group_size}: must be >= 1")
    if mesh is not None and rules is None:
        rules = SAMPLING_RULES
    prompts = fit_prompts(
        prompts, sampling.max_new_tokens, cfg.max_position_embeddings, sampling.context_overflow
    )
    dtype = weights.resolve(sampling, len(prompts) * group_size)
    params = prepare_params(params, cfg, weight_dtype=dtype, mesh=mesh, rules=rules)
    state = SampleState(
        cache=None,
        pending=jnp.zeros(len(prompts), jnp.int32),
        pending_position=jnp.zeros(len(prompts), jnp.int32),
        history=[list(p) for p in prompts for _ in range(group_size)],
        params=params,
        cfg=cfg,
        eos_ids=tuple(int(e) for e in eos_ids),
        stop_strings=tuple(stop_strings),
        tokenizer=tokenizer,
        pad_id=int(pad_id),
        mesh=mesh,
        rules=rules,
    )
    shared = 0 if mesh is not None else shared_prefix_length(prompts, sampling.shared_prefix)
    if shared:
        rests = [p[shared:] for p in prompts]
        room = rest_length(max(len(r) for r in rests)) + sampling.max_new_tokens
        state = _prefill_shared(state, prompts[0][:shared], len(prompts), room)
        starts = np.full(len(prompts), shared, np.int32)
        return _run(state, rests, starts, sampling, rng, group_size, pad_to=rest_length)
    return _run(state, prompts, np.zeros(len(prompts), np.int32), sampling, rng, group_size)


def continue_(
    state: SampleState,
    new_token_chunks: Sequence[Sequence[int]],
    sampling: SamplingParams,
    rng,
    **overrides,
) -> SampleOutput:
    """Appends one chunk per row (a tool response, the next instruction) to the live cache and
    decodes on, without re-prefilling the history: equal to sampling from a fresh prefill of
    history + chunk. `overrides` replace SampleState fields (params, eos_ids, stop_strings...).
    """
    if len(new_token_chunks) != len(state.history):
        raise ValueError(
            f"continue_ got {len(new_token_chunks)} chunks for {len(state.history)} rows"
        )
    state = dataclasses.replace(state, **overrides)
    pending = np.asarray(state.pending)
    chunks = [[int(pending[i]), *c] for i, c in enumerate(new_token_chunks)]
    state = dataclasses.replace(
        state,
        history=[h + list(c) for h, c in zip(state.history, new_token_chunks)],
    )
    starts = np.asarray(state.pending_position)
    next_positions = starts + np.asarray([len(c) for c in chunks])
    check_continuation(next_positions, sampling.max_new_tokens, state.cfg.max_position_embeddings)
    return _run(state, chunks, starts, sampling, rng, group_size=1)
