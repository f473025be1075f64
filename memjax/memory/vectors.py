"""Shared pieces of the index API: the Hit record and input validation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class Hit(NamedTuple):
    id: str
    score: float  # inner product; a cosine for unit vectors


def check_ids(ids: Sequence[str]) -> list[str]:
    ids = list(ids)
    for i in ids:
        if not isinstance(i, str) or not i:
            raise ValueError(f"ids must be non-empty strings, got {i!r}")
    if len(set(ids)) != len(ids):
        raise ValueError("ids repeat within one call")
    return ids


def check_vectors(vectors, n: int | None, dim: int | None = None) -> np.ndarray:
    """A C-contiguous float32 [n, dim] array, or one clear error."""
    v = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if v.ndim != 2:
        raise ValueError(f"vectors must be 2-D [N, D], got shape {v.shape}")
    if n is not None and v.shape[0] != n:
        raise ValueError(f"{n} ids but {v.shape[0]} vectors")
    if dim is not None and v.shape[1] != dim:
        raise ValueError(f"vectors have dimension {v.shape[1]}, the index holds {dim}")
    if not np.isfinite(v).all():
        raise ValueError("vectors contain NaN or infinity")
    return v
