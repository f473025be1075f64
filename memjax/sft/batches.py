"""Length-bucketed SFT batches: rows of similar length share a batch, so padding stays small
and the number of compiled train steps stays bounded (one per bucket length).

    plan = batch_plan(lengths, batch_rows=8, bucket=64, max_len=1024, seed=0, epochs=3)
    batch = make_batch(rows, plan[0], pad_id, bucket=64)   # tokens, token_mask, loss_mask

Each epoch: rows are shuffled (seed, epoch), grouped by their bucket (length rounded up to a
multiple of `bucket`), cut into batches of `batch_rows`, and the batches are shuffled. A
bucket's last partial batch is filled with rows drawn again from the same bucket, so every
batch has the same number of rows and every row is seen at least once per epoch.

With `groups` (one bytes key or None per row, `memjax.models.shared_prefix.prefix_groups`), a
bucket is also split by group, so rows that open with the same prompt share batches; `make_batch(
share_prefix=N)` then cuts their common prefix out (`memjax.models.shared_prefix`).
"""

from __future__ import annotations

import math

import numpy as np

from memjax.models.shared_prefix import shared_length
from memjax.sft.rows import Row
from memjax.training.logprobs import trained_positions


def bucket_length(length: int, bucket: int, max_len: int) -> int:
    return min(max_len, bucket * max(1, math.ceil(length / bucket)))


def _bucket_keys(lengths, bucket: int, max_len: int, groups, batch_rows: int) -> list:
    """Each row's batching key: its length bucket, and with `groups` its prefix group too,
    unless fewer than `batch_rows` rows share that group and bucket (refilling a batch of them
    would repeat rows; they are batched by length alone)."""
    keys = [bucket_length(int(n), bucket, max_len) for n in lengths]
    if groups is None:
        return keys
    grouped = [(g is not None, g or b"", k) for g, k in zip(groups, keys)]  # sortable
    counts: dict = {}
    for key in grouped:
        counts[key] = counts.get(key, 0) + 1
    return [key if counts[key] >= batch_rows else (False, b"", key[2]) for key in grouped]


def _epoch_batches(lengths, batch_rows: int, bucket: int, max_len: int, rng, groups=None):
    order = rng.permutation(len(lengths))
    keys = _bucket_keys(lengths, bucket, max_len, groups, batch_rows)
    by_bucket: dict = {}
    for i in order:
        by_bucket.setdefault(keys[i], []).append(int(i))
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


def batch_plan(
    lengths, *, batch_rows: int, bucket: int, max_len: int, seed: int, epochs: int, groups=None
):
    """Row indices of every batch of `epochs` epochs, in training order."""
    plan = []
    for epoch in range(epochs):
        rng = np.random.default_rng([seed, epoch])
        plan += _epoch_batches(lengths, batch_rows, bucket, max_len, rng, groups)
    return plan


def batches_per_epoch(lengths, *, batch_rows: int, bucket: int, max_len: int, groups=None) -> int:
    counts: dict = {}
    for key in _bucket_keys(lengths, bucket, max_len, groups, batch_rows):
        counts[key] = counts.get(key, 0) + 1
    return sum(math.ceil(c / batch_rows) for c in counts.values())


def _trained_positions(loss_mask: np.ndarray, bucket: int) -> dict:
    """Where each row's trained tokens are: loss_positions [B, K] int32 (in order, padded with
    0) and loss_valid [B, K] bool, K the most any row has rounded up to `bucket` (few shapes)."""
    most = max(int(loss_mask.sum(axis=1).max()), 1)
    return trained_positions(loss_mask, bucket_length(most, bucket, loss_mask.shape[1]))


def make_batch(
    rows: list[Row], indices, pad_id: int, *, bucket: int, max_len: int, share_prefix: int = 0
) -> dict:
    """Right-padded arrays for the rows at `indices`: tokens [B, L] int32, token_mask and
    loss_mask [B, L] bool, with L the batch's bucket length, and the trained tokens' positions
    (loss_positions [B, K] int32, loss_valid [B, K] bool: the only ones the loss scores).

    share_prefix=N > 0: when the rows share an untrained prefix of at least N tokens (P, a
    multiple of `bucket`), the arrays hold each row's tokens after it and "prefix" [B, P] holds
    it (the same in every row, so micro-batch slices keep it)."""
    picked = [rows[int(i)] for i in indices]
    start = 0
    if share_prefix:
        start = shared_length(
            [r.tokens for r in picked],
            [r.loss_mask for r in picked],
            granularity=bucket,
            minimum=share_prefix,
        )
    length = bucket_length(max(len(r.tokens) for r in picked) - start, bucket, max_len)
    B = len(picked)
    tokens = np.full((B, length), pad_id, np.int32)  # [B, L]
    token_mask = np.zeros((B, length), bool)  # [B, L]
    loss_mask = np.zeros((B, length), bool)  # [B, L]
    for b, r in enumerate(picked):
        n = len(r.tokens) - start
        tokens[b, :n] = r.tokens[start:]
        token_mask[b, :n] = True
        loss_mask[b, :n] = r.loss_mask[start:]
    batch = {"tokens": tokens, "token_mask": token_mask, "loss_mask": loss_mask}
    batch.update(_trained_positions(loss_mask, bucket))
    if start:
        batch["prefix"] = np.tile(picked[0].tokens[:start], (B, 1)).astype(np.int32)  # [B, P]
    return batch


__all__ = ["bucket_length", "batch_plan", "batches_per_epoch", "make_batch"]
