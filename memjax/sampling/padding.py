"""Left padding into length buckets, so a few shapes cover all prompt and chunk lengths.

Every row of a batch writes its next tokens at the same cache slot, so prompts (and later
continuation chunks) are left-padded to one length. Lengths are rounded up to a bucket, which
bounds how many prefill and decode programs get compiled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_BUCKET = 16
CACHE_ROUNDING = 128


def bucket_length(n: int, minimum: int = MIN_BUCKET) -> int:
    """The smallest power of two >= max(n, minimum)."""
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


def cache_length(n: int) -> int:
    """Cache slots for n tokens, rounded up to a multiple of CACHE_ROUNDING."""
    return -(-int(n) // CACHE_ROUNDING) * CACHE_ROUNDING


def left_pad(
    rows: Sequence[Sequence[int]], length: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """tokens [B, length] int32 and mask [B, length] bool, each row right-aligned."""
    tokens = np.full((len(rows), length), pad_id, np.int32)
    mask = np.zeros((len(rows), length), bool)
    for i, row in enumerate(rows):
        if len(row) > length:
            raise ValueError(f"row {i} has {len(row)} tokens, more than the bucket {length}")
        if len(row):
            tokens[i, length - len(row) :] = row
            mask[i, length - len(row) :] = True
    return tokens, mask


def positions_after(mask: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Positions [B, T] for the real tokens of `mask`, continuing from `start` [B] (the
    position of each row's first new token); pads get the row's first position (unused)."""
    counts = np.cumsum(mask, axis=1) - 1
    return (np.maximum(counts, 0) + start[:, None]).astype(np.int32)
