"""The decoder's KV cache: preallocated slots, a validity mask, and one shared write index.

Layout: k, v are [L, B, S, K, Hd] (layers, batch, cache slots, kv heads, head dim). All rows write
their next tokens at the same slot `index`, so a batch of prompts is left-padded to a common
length and later chunks (tool responses, continuations) are padded to a common length too. Pad
slots are simply marked invalid in `valid` [B, S]; attention ignores them. Because positions are
passed explicitly to RoPE, holes in the cache never shift a token's position.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from memjax.models.config import DecoderConfig
from memjax.models.params import ArrayInfo, zeros_init

CACHE_AXES = ("layers", "batch", "cache_seq", "kv_heads", "head_dim")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    k: jax.Array  # [L, B, S, K, Hd]
    v: jax.Array  # [L, B, S, K, Hd]
    valid: jax.Array  # [B, S] bool: slot holds a real token
    index: jax.Array  # [] int32: next slot to write

    @property
    def size(self) -> int:
        return self.k.shape[2]

    @property
    def batch(self) -> int:
        return self.k.shape[1]


def cache_abstract(cfg: DecoderConfig, batch: int, size: int) -> dict[str, ArrayInfo]:
    kv = ArrayInfo(
        (cfg.num_layers, batch, size, cfg.num_kv_heads, cfg.head_dim),
        cfg.dtype,
        CACHE_AXES,
        zeros_init,
    )
    return {
        "k": kv,
        "v": kv,
        "valid": ArrayInfo((batch, size), jnp.bool_, ("batch", "cache_seq"), zeros_init),
    }


def init_cache(cfg: DecoderConfig, batch: int, size: int) -> KVCache:
    shape = (cfg.num_layers, batch, size, cfg.num_kv_heads, cfg.head_dim)
    return KVCache(
        k=jnp.zeros(shape, cfg.dtype),
        v=jnp.zeros(shape, cfg.dtype),
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


def repeat_rows(cache: KVCache, times: int) -> KVCache:
    """Each row repeated `times` times, consecutively ([p0, p0, p1, p1, ...] for times=2):
    a GRPO group shares its prompt's prefill instead of prefilling it G times."""
    return KVCache(
        k=jnp.repeat(cache.k, times, axis=1),
        v=jnp.repeat(cache.v, times, axis=1),
        valid=jnp.repeat(cache.valid, times, axis=0),
        index=cache.index,
    )
