"""Batch compaction: a decode batch that shrinks into smaller batch buckets as rows stop.

A static batch keeps computing rows that have stopped until its longest row ends; GRPO groups
and multi-turn agents stop at very different lengths, and on CPU a decode step's cost grows
with its rows. So the decode loop exits as soon as the running rows fit the next smaller
bucket (powers of two, like the length buckets: the compiled programs stay a handful), the
running rows and their cache slices move into a batch of that size, and decoding goes on.

A row's draws are keyed by its index in the call's output (`DecodeCarry.rows`), never by its
place in a batch, so a compacted run samples exactly what the static batch samples. Rows that
leave are kept aside with their cache and put back in their original order at the end, so a
continuation sees the same cache as without compaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from memjax.sampling.carry import DecodeCarry

MIN_BATCH_BUCKET = 1


def batch_bucket(n: int, minimum: int = MIN_BATCH_BUCKET) -> int:
    """The smallest power of two >= max(n, minimum)."""
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


def smaller_bucket(batch: int, minimum: int = MIN_BATCH_BUCKET) -> int:
    """The largest bucket strictly below `batch` (0 when none is: the batch stays)."""
    if batch <= minimum:
        return 0
    return max(1 << ((int(batch) - 1).bit_length() - 1), minimum)


@jax.jit
def split_carry(carry: DecodeCarry, keep: jax.Array, drop: jax.Array):
    """(the carry of rows `keep` [B'], the carry of rows `drop` [B - B']): one gather each
    (nothing donated: neither output has the input's shape)."""
    return _take(carry, keep), _take(carry, drop)


def _take(carry: DecodeCarry, rows: jax.Array) -> DecodeCarry:
    return jax.tree.map(
        lambda a: a if a.ndim == 0 else jnp.take(a, rows, axis=_batch_axis(carry, a)),
        carry,
    )


def _batch_axis(carry: DecodeCarry, a: jax.Array) -> int:
    # Every leaf is batch-major except a stacked cache's k/v ([L, B, K, S, Hd]).
    stacked = not carry.cache.per_layer and a.ndim == 5
    return 1 if stacked else 0


def _merge(parts: list[DecodeCarry]) -> DecodeCarry:
    """One carry with every original row once, in original order (the last part's step and
    cache index: rows that left earlier have no valid slots past the point where they left)."""
    last = parts[-1]
    order = jnp.argsort(jnp.concatenate([p.rows for p in parts]))

    def merge(*leaves):
        if leaves[0].ndim == 0:
            return leaves[-1]
        axis = 1 if (not last.cache.per_layer and leaves[0].ndim == 5) else 0
        return jnp.take(jnp.concatenate(leaves, axis=axis), order, axis=axis)

    merged = jax.tree.map(merge, *parts)
    cache = dataclasses.replace(merged.cache, index=last.cache.index)
    return dataclasses.replace(merged, cache=cache)


def decode_compacting(
    carry: DecodeCarry,
    steps: Callable[..., DecodeCarry],
    max_new_tokens: int,
    minimum: int = MIN_BATCH_BUCKET,
) -> tuple[DecodeCarry, tuple[int, ...]]:
    """Runs `steps(carry, stop_at_live=n)` (loop.decode_steps) and compacts whenever it stops
    with n or fewer rows running. Returns the carry of all rows in their original order and
    the batch sizes the loop ran at."""
    left: list[DecodeCarry] = []  # rows that stopped and left the batch, with their caches
    sizes = [int(carry.rows.shape[0])]
    while True:
        target = smaller_bucket(sizes[-1], minimum)
        carry = steps(carry, stop_at_live=target)
        done = np.asarray(carry.done)
        if target == 0 or done.all() or int(carry.step) >= max_new_tokens:
            break
        running, stopped = np.nonzero(~done)[0], np.nonzero(done)[0]
        size = batch_bucket(len(running), minimum)
        # Stopped rows fill the new batch up to its bucket; they stay stopped (nothing of
        # theirs changes), so each original row is final in exactly one part.
        keep = np.concatenate([running, stopped[: size - len(running)]]).astype(np.int32)
        drop = stopped[size - len(running) :].astype(np.int32)
        carry, gone = split_carry(carry, jnp.asarray(keep), jnp.asarray(drop))
        left.append(gone)
        sizes.append(size)
    return (_merge([*left, carry]) if left else carry), tuple(sizes)
