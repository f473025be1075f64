"""The RL update's shared prefix: a GRPO group's rows share their prompt, and the update
regroups its rows so that each micro-batch runs it once (how a shared prefix is found and run:
`memjax.models.shared_prefix`; the sampler's prefill of it: `memjax.sampling.prefix`).

Every row of a group opens with the same prompt, and in Memory-R1's answer agent that prompt
is ~1,450 of a row's ~1,550 tokens (the question and 20 retrieved memories; the answer is the
rest). The policy update, the reference pass and the old log-prob pass would run the decoder
over G copies of it. Here the rows of a batch are reordered so that each micro-batch (the train
step's strided split, `memjax.training.train_step`) or log-prob chunk holds rows that open alike,
and every row is cut after the prefix all rows of its micro-batch share, none of it trained:
the micro-batch runs that prefix once and each row's remainder over its keys and values
(`memjax.models.shared_prefix`). Rows of different prompts still share their common opening
(the system turn and fixed instructions).

The gradient of a batch is a sum over its rows, so the order of the rows does not change it,
and the prefix's keys and values carry each row's gradient back to it: loss, gradients and
metrics are the plain batch's up to the order of f32 sums (tests/rl/test_shared_prefix.py).

    batch, order = share_prefixes(batch, chunks=4, granularity=128, minimum=256)
    # batch: rows in `order`, "prefix" [B, P] and the [B, T] arrays cut to [B, W];
    # unchanged but reordered when fewer than `minimum` tokens are shared.

Each micro-batch shares its own prefix, rounded down to `granularity` (few compiled shapes): the
prompts of a step differ in length (the answer agent's with the memories it retrieves), and one
prefix for all, the shortest, would leave the longer prompts' tails in every row's remainder.
"prefix" is [B, P] with P the longest, a shorter one right-padded with PREFIX_PAD
(`memjax.models.shared_prefix` masks it out), so one shape serves every micro-batch; each row's
remainder starts after its own micro-batch's prefix and is as wide as the longest remainder,
rounded up to `granularity`.
One host only: on several, a global micro-batch holds every host's rows, which share nothing.
"""

from __future__ import annotations

import numpy as np

from memjax.models.shared_prefix import PREFIX_PAD, shared_length

SHARED_PREFIX_GRANULARITY = 128  # prefix and remainder widths: multiples of this many tokens

# [B, T] arrays aligned with the tokens: cut with them. Others ([B, K], [B]) keep their width.
TOKEN_ALIGNED = (
    "tokens",
    "token_mask",
    "loss_mask",
    "advantages",
    "old_logp",
    "ref_logp",
    "sampler_logp",
    "old_values",
    "returns",
)


def grouped_order(tokens: np.ndarray, token_mask: np.ndarray, chunks: int) -> np.ndarray:
    """A row order [B] under which the strided split into `chunks` (chunk j: rows j, j + M, ...)
    gives each chunk consecutive rows of the token-sorted batch, so rows that open alike land in
    one chunk. Empty rows (no token) go last."""
    B = len(tokens)
    lengths = token_mask.sum(axis=1)
    keys = [(lengths[r] == 0, tokens[r, : lengths[r]].tobytes()) for r in range(B)]
    by_prompt = sorted(range(B), key=keys.__getitem__)  # equal openings are neighbours
    per_chunk = B // chunks
    order = np.empty(B, np.int64)
    for j in range(chunks):  # chunk j's k-th row sits at k * chunks + j
        order[j::chunks] = by_prompt[j * per_chunk : (j + 1) * per_chunk]
    return order


def _chunk_rows(B: int, chunks: int) -> list[np.ndarray]:
    return [np.arange(j, B, chunks) for j in range(chunks)]


def chunk_prefix_lengths(batch: dict, chunks: int, granularity: int, minimum: int) -> np.ndarray:
    """[chunks]: the prefix each chunk's non-empty rows share, untrained; all 0 when a chunk's
    is under `minimum` (one chunk running its rows whole would need another compiled shape).
    A chunk of empty rows gets the longest (it has no loss: any prefix serves it)."""
    tokens, token_mask, loss_mask = batch["tokens"], batch["token_mask"], batch["loss_mask"]
    lengths = np.full(chunks, -1, np.int64)
    for j, rows in enumerate(_chunk_rows(len(tokens), chunks)):
        real = [r for r in rows if token_mask[r].any()]
        if not real:
            continue
        counts = [int(token_mask[r].sum()) for r in real]
        lengths[j] = shared_length(
            [tokens[r, :n] for r, n in zip(real, counts)],
            [loss_mask[r, :n] for r, n in zip(real, counts)],
            granularity=granularity,
            minimum=minimum,
        )
        if lengths[j] == 0:
            return np.zeros(chunks, np.int64)
    if (lengths < 0).all():
        return np.zeros(chunks, np.int64)
    return np.where(lengths < 0, lengths.max(), lengths)


def _prefix_rows(batch: dict, chunks: int, lengths: np.ndarray) -> np.ndarray:
    """[B, max(lengths)]: every row of chunk j gets the chunk's shared prefix (an empty row too,
    since a micro-batch runs the prefix of its first row), right-padded with PREFIX_PAD."""
    tokens, token_mask = batch["tokens"], batch["token_mask"]
    prefix = np.full((len(tokens), lengths.max()), PREFIX_PAD, tokens.dtype)
    for rows, P in zip(_chunk_rows(len(tokens), chunks), lengths):
        real = [r for r in rows if token_mask[r].any()]
        prefix[rows, :P] = tokens[real[0], :P] if real else 0
    return prefix


def cut_width(token_mask: np.ndarray, row_prefix: np.ndarray, granularity: int) -> int:
    """The remainder's width: the longest row past its own prefix, rounded up to `granularity`
    (at most the columns past the shortest prefix)."""
    longest = int((token_mask.sum(axis=1) - row_prefix).max(initial=0))
    rounded = -(-max(longest, 1) // granularity) * granularity
    return min(token_mask.shape[1] - int(row_prefix.min()), rounded)


def _cut_rows(values: np.ndarray, row_prefix: np.ndarray, width: int) -> np.ndarray:
    """[B, width]: row r's columns [row_prefix[r], row_prefix[r] + width), zero past its end."""
    out = np.zeros((len(values), width), values.dtype)
    for r, P in enumerate(row_prefix):
        kept = values[r, P : P + width]
        out[r, : len(kept)] = kept
    return out


def share_prefixes(
    batch: dict[str, np.ndarray], chunks: int, *, granularity: int, minimum: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(the batch reordered and each row cut after its chunk's shared prefix, the order [B]).

    batch: right-padded rows, "tokens", "token_mask", "loss_mask" [B, T] and any of
    TOKEN_ALIGNED; "loss_positions" / "loss_valid" [B, K] (`memjax.training.logprobs.
    trained_positions`) are moved with the cut. `chunks` must divide B."""
    B = len(batch["tokens"])
    if B % chunks:
        raise ValueError(f"{B} rows do not split into {chunks} chunks")
    order = grouped_order(batch["tokens"], batch["token_mask"], chunks)
    batch = {k: np.asarray(v)[order] for k, v in batch.items()}
    lengths = chunk_prefix_lengths(batch, chunks, granularity, minimum)  # [chunks]
    if not lengths.any():
        return batch, order
    row_prefix = lengths[np.arange(B) % chunks]  # [B]: row r sits in chunk r % chunks
    width = cut_width(batch["token_mask"], row_prefix, granularity)
    out = {"prefix": _prefix_rows(batch, chunks, lengths)}
    for k, v in batch.items():
        out[k] = _cut_rows(v, row_prefix, width) if k in TOKEN_ALIGNED else v
    if "loss_positions" in batch:  # padding slots (not loss_valid) point at column 0
        shifted = batch["loss_positions"] - row_prefix[:, None]
        out["loss_positions"] = np.where(batch["loss_valid"], shifted, 0).astype(
            batch["loss_positions"].dtype
        )
    return out, order


def restore_order(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Rows computed in `order` back in the batch's own order."""
    out = np.empty_like(rows)
    out[order] = rows
    return out


__all__ = [
    "SHARED_PREFIX_GRANULARITY",
    "TOKEN_ALIGNED",
    "grouped_order",
    "restore_order",
    "share_prefixes",
    "chunk_prefix_lengths",
]
