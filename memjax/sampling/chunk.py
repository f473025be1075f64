"""Column chunks of a left-padded prefill: a long batch prefilled a piece at a time.

A prefill of T new tokens against a cache of S slots computes [B, K, G, T, S + T] attention
scores per layer, which is what a batched call's memory peaks on (the peaks in one piece and in
chunks: `tools/bench.py prefill_chunks`, docs/results.md). Cut into column
chunks of C tokens, the same tokens go into the same cache slots at the same positions, a
chunk at a time (the first into a fresh cache, the rest appended by `loop.prefill`), so each
chunk's queries see exactly the keys they saw in one piece and the scores peak at
[B, K, G, C, S + C]. A row that has not started yet in some chunk (all padding there) writes
only invalid slots, which no later query reads. Only the last chunk's logits are used: every
row is right-aligned, so its last token is there.

Chunks are cut from the right, so all but the first are exactly C tokens long: one program per
(chunk, cache) shape, whatever the prompt bucket.
"""

from __future__ import annotations


def column_chunks(length: int, chunk: int) -> list[slice]:
    """Column slices of a [B, length] prefill, in order, each at most `chunk` wide (0: one)."""
    if chunk <= 0 or length <= chunk:
        return [slice(0, length)]
    first = length % chunk or chunk
    return [slice(0, first)] + [slice(s, s + chunk) for s in range(first, length, chunk)]
