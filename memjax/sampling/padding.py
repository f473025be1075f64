"""Left padding into length buckets, so a few shapes cover all prompt and chunk lengths.

Every row of a batch writes its next tokens at the same cache slot, so prompts (and later
continuation chunks) are left-padded to one length. Lengths are rounded up to a bucket, which
bounds how many prefill and decode programs get compiled: powers of two up to FINE_ABOVE
tokens, then quarter octaves (1280, 1536, 1792, 2048, 2560, ...). Long prompts are where the
padding costs: a 1,100-token Memory-R1 manager prompt padded to 2,048 is prefilled at 1.9x its
length and every decode step reads a cache 1.5x longer than it needs; in quarter octaves it
pads to 1,280, and no bucket wastes more than a fifth of its length.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_BUCKET = 16
FINE_ABOVE = 1024  # longer lengths are bucketed in quarter octaves
CACHE_ROUNDING = 128


def bucket_length(n: int, minimum: int = MIN_BUCKET) -> int:
    """The smallest bucket >= max(n, minimum): a power of two up to FINE_ABOVE, above it a
    multiple of a quarter of the octave n falls in (n = 1100 -> 1280, 2100 -> 2560)."""
    n = max(int(n), minimum)
    if n <= FINE_ABOVE:
        return 1 << (n - 1).bit_length()
    step = 1 << ((n - 1).bit_length() - 3)  # (1024, 2048]: 256; (2048, 4096]: 512
    return -(-n // step) * step


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
