"""The decoder over a slot cache: every row holds its own sequence, at its own length.

    cache = init_slots(cfg, slots=8, size=2048, per_layer=True)
    hidden, cache = forward_slots(params, tokens, write_at, cfg, cache, window=512)

Row b of the cache holds one sequence in slots [0, length_b): a token's slot is its position,
so there is no padding and no shared write index (`kv_cache.KVCache` is the lock-step
sampler's cache, where all rows write at one index). `forward_slots` feeds T tokens per row at
positions [write_at[b], write_at[b] + T), writes their keys and values there, and lets each
query attend to every slot up to its own. Attention reads only the first `window` slots: a
caller that knows no live row is longer passes a smaller window, so a step costs what the live
rows hold, not what the buffer could hold (an XLA slice). A one-token decode step on a backend
with a decode kernel (GPU, TPU: `slot_attention`) reads each row's own slots instead, straight
from the buffers, and ignores the window; it does so for a per-layer cache only (stacked
layers run under a scan, where a layer's buffers are a slice a kernel cannot take in place).

Under a mesh (`mesh`, `rules`) the cache is laid out as the sampler's (`SLOT_CACHE_AXES`: rows
over the data axes, kv heads over `tensor`) and the blocks constrain their activations.

A row that is not live still runs (the batch is one shape): it writes at its own `write_at`,
which is past its valid slots, and its output is ignored.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from memjax.models import decoder, embedding
from memjax.models.config import DecoderConfig
from memjax.models.kv_cache import CACHE_AXES
from memjax.models.rope import inverse_frequencies, rope_tables

# Logical axes of a stacked slot cache [L, B, K, S, Hd]: the lock-step cache's, since the
# layouts are the same (a per-layer cache drops the first).
SLOT_CACHE_AXES = CACHE_AXES


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class SlotCache:
    k: jax.Array | tuple[jax.Array, ...]  # [L, B, K, S, Hd] or L x [B, K, S, Hd]
    v: jax.Array | tuple[jax.Array, ...]  # same as k

    @property
    def per_layer(self) -> bool:
        return isinstance(self.k, (tuple, list))

    @property
    def size(self) -> int:
        return (self.k[0] if self.per_layer else self.k).shape[-2]

    @property
    def slots(self) -> int:
        return (self.k[0].shape[0]) if self.per_layer else self.k.shape[1]


def init_slots(cfg: DecoderConfig, slots: int, size: int, *, per_layer: bool) -> SlotCache:
    shape = (slots, cfg.num_kv_heads, size, cfg.head_dim)
    if per_layer:
        zeros = lambda: tuple(jnp.zeros(shape, cfg.dtype) for _ in range(cfg.num_layers))
        return SlotCache(zeros(), zeros())
    stacked = (cfg.num_layers, *shape)
    return SlotCache(jnp.zeros(stacked, cfg.dtype), jnp.zeros(stacked, cfg.dtype))


def take_slot(cache: SlotCache, slot: jax.Array, *, sharded: bool = False) -> SlotCache:
    """The one-row cache of `slot` ([] int32).

    `sharded`: the rows are split over devices, where a dynamic slice at a traced row makes the
    compiler gather the whole cache onto every device first; the row is taken instead as a
    masked sum over the rows, each device summing its own (the one that holds the row gives
    it, the others zeros) and the devices adding one row's worth."""
    axis = 0 if cache.per_layer else 1
    if sharded:

        def take(a):
            shape = [1] * a.ndim
            shape[axis] = a.shape[axis]
            mine = (jnp.arange(a.shape[axis]) == slot).reshape(shape)
            return jnp.where(mine, a, jnp.zeros((), a.dtype)).sum(axis, keepdims=True)

    else:
        take = lambda a: jax.lax.dynamic_slice_in_dim(a, slot, 1, axis=axis)
    return SlotCache(jax.tree.map(take, cache.k), jax.tree.map(take, cache.v))


def put_slot(cache: SlotCache, row: SlotCache, slot: jax.Array) -> SlotCache:
    """`cache` with `row` (a one-row cache) written back at `slot`."""
    axis = 0 if cache.per_layer else 1
    put = lambda a, r: jax.lax.dynamic_update_slice_in_dim(a, r, slot, axis=axis)
    return SlotCache(jax.tree.map(put, cache.k, row.k), jax.tree.map(put, cache.v, row.v))


def forward_slots(
    params,
    tokens: jax.Array,
    write_at: jax.Array,
    cfg: DecoderConfig,
    cache: SlotCache,
    window: int,
    *,
    rows: jax.Array | None = None,
    mesh=None,
    rules=None,
) -> tuple[jax.Array, SlotCache]:
    """Final-norm hidden states [R, T, D] of tokens [R, T] fed at positions write_at [R] +
    [0, T), and the cache with their keys and values written there. Each query sees the slots
    up to its own position among the first `window` (which must cover every live row's
    write_at + T). `rows` [R]: the cache rows the tokens belong to (None: every row, R = B; a
    prompt chunk names its one slot). `mesh` and `rules` (optional): the layout the blocks
    constrain to."""
    T = tokens.shape[1]
    where = decoder.SlotWrite(write_at, rows)
    positions = write_at[:, None] + jnp.arange(T, dtype=jnp.int32)[None]  # [B, T]
    x = embedding.lookup(params["embed"], tokens).astype(cfg.dtype)  # [B, T, D]
    cos, sin = rope_tables(
        positions, inverse_frequencies(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)
    )
    mask = jnp.arange(window)[None, None, :] <= positions[:, :, None]  # [B, T, W]
    block = lambda x, layer, kv: decoder._layer(  # noqa: SLF001 (the decoder's own block)
        x, layer, cos, sin, mask, kv, where, cfg, mesh, rules
    )
    layers = params["layers"]
    if isinstance(layers, (list, tuple)):
        if not cache.per_layer:
            raise ValueError("per-layer parameters need a per-layer slot cache")
        new_k, new_v = [], []
        for i, layer in enumerate(layers):
            x, (ck, cv) = block(x, layer, (cache.k[i], cache.v[i]))
            new_k.append(ck)
            new_v.append(cv)
        new_cache = SlotCache(tuple(new_k), tuple(new_v))
    else:
        if cache.per_layer:
            raise ValueError("stacked parameters need a stacked slot cache")

        # Under the layer scan a layer's buffers are a slice of the stacked cache, and a
        # kernel's operand must be a buffer of its own: the layer's slots would be copied out
        # for it on every step. The decode kernels read per-layer buffers only; stacked ones
        # attend over the window in XLA.
        scan_cfg = cfg.replace(attention="xla")
        block = lambda x, layer, kv: decoder._layer(  # noqa: SLF001
            x, layer, cos, sin, mask, kv, where, scan_cfg, mesh, rules
        )

        def body(x, xs):
            layer, ck, cv = xs
            return block(x, layer, (ck, cv))

        x, (k, v) = jax.lax.scan(body, x, (layers, cache.k, cache.v))
        new_cache = SlotCache(k, v)
    return decoder.rms_norm(x, params["final_norm"], cfg.rms_norm_eps), new_cache
