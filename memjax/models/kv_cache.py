"""The decoder's KV cache: preallocated slots, a validity mask, and one shared write index.

Layout: k, v are [L, B, K, S, Hd] (layers, batch, kv heads, cache slots, head dim), or, in the
per-layer form, tuples of L arrays [B, K, S, Hd]. Slots sit next to head_dim so attention reads
each head's keys as one contiguous [S, Hd] matrix (no transposed copy of the cache per step).
The per-layer form pairs with per-layer parameters (`decoder.unstack_layers`) for decoding on
CPU, where slicing a layer out of a stacked array costs a copy on every step.

All rows write their next tokens at the same slot `index`, so a batch of prompts is left-padded
to a common length and later chunks (tool responses, continuations) are padded to a common
length too. Pad slots are simply marked invalid in `valid` [B, S]; attention ignores them.
Because positions are passed explicitly to RoPE, holes in the cache never shift a token's
position.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from memjax.models.config import DecoderConfig
from memjax.models.params import ArrayInfo, zeros_init

CACHE_AXES = ("layers", "batch", "kv_heads", "cache_seq", "head_dim")
LAYER_CACHE_AXES = CACHE_AXES[1:]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    k: jax.Array | tuple[jax.Array, ...]  # [L, B, K, S, Hd] or L x [B, K, S, Hd]
    v: jax.Array | tuple[jax.Array, ...]  # same as k
    valid: jax.Array  # [B, S] bool: slot holds a real token
    index: jax.Array  # [] int32: next slot to write

    @property
    def size(self) -> int:
        return self.valid.shape[1]

    @property
    def batch(self) -> int:
        return self.valid.shape[0]

    @property
    def per_layer(self) -> bool:
        return isinstance(self.k, (tuple, list))

    @property
    def num_layers(self) -> int:
        return len(self.k) if self.per_layer else self.k.shape[0]

    def layer(self, i: int) -> tuple[jax.Array, jax.Array]:
        """Layer i's (k, v), each [B, K, S, Hd]."""
        return self.k[i], self.v[i]


def cache_abstract(cfg: DecoderConfig, batch: int, size: int) -> dict[str, ArrayInfo]:
    kv = ArrayInfo(
        (cfg.num_layers, batch, cfg.num_kv_heads, size, cfg.head_dim),
        cfg.dtype,
        CACHE_AXES,
        zeros_init,
    )
    return {
        "k": kv,
        "v": kv,
        "valid": ArrayInfo((batch, size), jnp.bool_, ("batch", "cache_seq"), zeros_init),
    }


def init_cache(cfg: DecoderConfig, batch: int, size: int, *, per_layer: bool = False) -> KVCache:
    if per_layer:
        shape = (batch, cfg.num_kv_heads, size, cfg.head_dim)
        k = tuple(jnp.zeros(shape, cfg.dtype) for _ in range(cfg.num_layers))
        v = tuple(jnp.zeros(shape, cfg.dtype) for _ in range(cfg.num_layers))
    else:
        shape = (cfg.num_layers, batch, cfg.num_kv_heads, size, cfg.head_dim)
        k, v = jnp.zeros(shape, cfg.dtype), jnp.zeros(shape, cfg.dtype)
    return KVCache(
        k=k,
        v=v,
        valid=jnp.zeros((batch, size), jnp.bool_),
        index=jnp.zeros((), jnp.int32),
    )


def cache_bytes(cfg: DecoderConfig, batch: int, size: int) -> int:
    return (
        2
        * cfg.num_layers
        * batch
        * size
        * cfg.num_kv_heads
        * cfg.head_dim
        * jnp.dtype(cfg.dtype).itemsize
    )


def _batch_axis(cache: KVCache) -> int:
    return 0 if cache.per_layer else 1


def repeat_rows(cache: KVCache, times: int) -> KVCache:
    """Each row repeated `times` times, consecutively ([p0, p0, p1, p1, ...] for times=2):
    a GRPO group shares its prompt's prefill instead of prefilling it G times."""
    axis = _batch_axis(cache)
    rep = lambda a: jnp.repeat(a, times, axis=axis)
    return KVCache(
        k=jax.tree.map(rep, cache.k),
        v=jax.tree.map(rep, cache.v),
        valid=jnp.repeat(cache.valid, times, axis=0),
        index=cache.index,
    )


def take_rows(cache: KVCache, rows: jax.Array) -> KVCache:
    """The cache restricted to (or reordered by) `rows` [B'] int32."""
    axis = _batch_axis(cache)
    take = lambda a: jnp.take(a, rows, axis=axis)
    return KVCache(
        k=jax.tree.map(take, cache.k),
        v=jax.tree.map(take, cache.v),
        valid=jnp.take(cache.valid, rows, axis=0),
        index=cache.index,
    )


def to_per_layer(cache: KVCache) -> KVCache:
    if cache.per_layer:
        return cache
    split = lambda a: tuple(a[i] for i in range(a.shape[0]))
    return KVCache(k=split(cache.k), v=split(cache.v), valid=cache.valid, index=cache.index)


def to_stacked(cache: KVCache) -> KVCache:
    if not cache.per_layer:
        return cache
    return KVCache(k=jnp.stack(cache.k), v=jnp.stack(cache.v), valid=cache.valid, index=cache.index)
