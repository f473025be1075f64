"""Length-bucketed SFT batches: rows of similar length share a batch, so padding stays small
and the number of compiled train steps stays bounded (one per bucket length).

    plan = batch_plan(lengths, batch_rows=8, bucket=64, max_len=1024, seed=0, epochs=3)
    batch = make_batch(rows, plan[0], pad_id, bucket=64)   # tokens, token_mask, loss_mask

Each epoch: rows are shuffled (seed, epoch), grouped by their bucket (length rounded up to a
multiple of `bucket`), cut into batches of `batch_rows`, and the batches are shuffled. A
bucket's last partial batch is filled with rows drawn again from the same bucket, so every
batch has the same number of rows and every row is seen at least once per epoch.
"""

from __future__ import annotations

import math

import numpy as np

from memjax.sft.rows import Row


def bucket_length(length: int, bucket: int, max_len: int) -> int:
    return min(max_len, bucket * max(1, math.ceil(length / bucket)))


def _epoch_batches(lengths, batch_rows: int, bucket: int, max_len: int, rng) -> list[np.ndarray]:
    order = rng.permutation(len(lengths))
    by_bucket: dict[int, list[int]] = {}
    for i in order:
        by_bucket.setdefault(bucket_length(int(lengths[i]), bucket, max_len), []).append(int(i))
    batches = []
    for key in sorted(by_bucket):
        members = by_bucket[key]
        short = -len(members) % batch_rows
        if short:  # refill from the same bucket: same padding, same batch shape
            members = members + [members[int(j)] for j in rng.integers(0, len(members), short)]
        batches += [
            np.asarray(members[j : j + batch_rows]) for j in range(0, len(members), batch_rows)
        ]
    return [batches[int(j)] for j in rng.permutation(len(batches))]


def batch_plan(lengths, *, batch_rows: int, bucket: int, max_len: int, seed: int, epochs: int):
    """Row indices of every batch of `epochs` epochs, in training order."""
    plan = []
    for epoch in range(epochs):
        rng = np.random.default_rng([seed, epoch])
        plan += _epoch_batches(lengths, batch_rows, bucket, max_len, rng)
    return plan


def batches_per_epoch(lengths, *, batch_rows: int, bucket: int, max_len: int) -> int:
    counts: dict[int, int] = {}
    for n in lengths:
        key = bucket_length(int(n), bucket, max_len)
        counts[key] = counts.get(key, 0) + 1
    return sum(math.ceil(c / batch_rows) for c in counts.values())


def make_batch(rows: list[Row], indices, pad_id: int, *, bucket: int, max_len: int) -> dict:
    """Right-padded arrays for the rows at `indices`: tokens [B, L] int32, token_mask and
    loss_mask [B, L] bool, with L the batch's bucket length."""
    picked = [rows[int(i)] for i in indices]
    length = bucket_length(max(len(r.tokens) for r in picked), bucket, max_len)
    B = len(picked)
    tokens = np.full((B, length), pad_id, np.int32)  # [B, L]
    token_mask = np.zeros((B, length), bool)  # [B, L]
    loss_mask = np.zeros((B, length), bool)  # [B, L]
    for b, r in enumerate(picked):
        n = len(r.tokens)
        tokens[b, :n] = r.tokens
        token_mask[b, :n] = True
        loss_mask[b, :n] = r.loss_mask
    return {"tokens": tokens, "token_mask": token_mask, "loss_mask": loss_mask}


__all__ = ["bucket_length", "batch_plan", "batches_per_epoch", "make_batch"]
