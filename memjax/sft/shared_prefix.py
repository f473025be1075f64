"""SFT rows grouped by the prompt they open with, so that batches share it
(`memjax.models.shared_prefix` runs the shared part once per batch)."""

from __future__ import annotations

import numpy as np


def prefix_groups(token_rows, loss_masks, length: int) -> list[bytes | None]:
    """Each row's first `length` tokens as bytes (rows with equal keys share at least that
    prefix, so they can share batches), or None for a row no longer than it or training one of
    its tokens."""
    keys: list[bytes | None] = []
    for tokens, mask in zip(token_rows, loss_masks):
        usable = len(tokens) > length and not np.any(mask[:length])
        keys.append(np.asarray(tokens[:length], np.int32).tobytes() if usable else None)
    return keys


__all__ = ["prefix_groups"]
