"""A per-token quantity as a (sum, denominator) pair, in the aggregation modes SFT and RL share.

The loss of a mini-batch is sum / denominator, where the denominator is computed once from the
*whole* mini-batch's mask (over all micro-batches and devices) and the sums of the micro-batches
are added. Because the denominator does not depend on parameters, the accumulated gradient is
exactly the gradient of the full-batch loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
EMPTY_ROWS = ("skip", "count")


def _rows_with_tokens(mask: jax.Array) -> jax.Array:
    return (mask.sum(axis=-1) > 0).astype(jnp.float32)  # [B]


def aggregate_sum(
    x: jax.Array, mask: jax.Array, mode: str = "token-mean", norm: float | None = None
) -> jax.Array:
    """The numerator of `mode` for x [B, T] under mask [B, T] (a scalar).

    seq-mean-token-sum-norm divides each row's sum by `norm`, the response budget (Dr.GRPO's
    constant: verl's loss_scale_factor, TRL's max_completion_length), never by the row width T,
    which in memjax includes the prompt.
    """
    m = mask.astype(jnp.float32)
    xm = jnp.where(m > 0, x, 0.0)  # where, not x * m: a NaN in a padded slot must not leak
    if mode == "token-mean":
        return xm.sum()
    row_sum = xm.sum(axis=-1)  # [B]
    if mode == "seq-mean-token-mean":
        return (row_sum / jnp.maximum(m.sum(axis=-1), 1.0)).sum()
    if mode == "seq-mean-token-sum":
        return row_sum.sum()
    if mode == "seq-mean-token-sum-norm":
        if norm is None:
            raise ValueError("seq-mean-token-sum-norm needs norm, the response budget")
        return row_sum.sum() / norm
    raise ValueError(f"aggregation mode {mode!r}; choose from {AGG_MODES}")


def aggregate_denominator(
    mask: jax.Array,
    mode: str = "token-mean",
    *,
    empty_rows: str = "skip",
    token_mask: jax.Array | None = None,
) -> jax.Array:
    """The denominator of `mode`: trainable tokens (token-mean) or rows (seq-*).

    empty_rows, for the seq-* modes, where the peers disagree on a row with no trainable token:
      "skip": it is not counted, as verl's `agg_loss` (global_batch_size unset: rows whose loss
        mask has a token);
      "count": it is counted, as TRL's `_compute_loss` (the mean over per_token_loss.size(0),
        which includes completions masked out by mask_truncated_completions). A row counts
        when token_mask [B, T] has a token, so the empty rows that pad a batch to the mesh
        never do; without token_mask every row counts.
    """
    if mode not in AGG_MODES:
        raise ValueError(f"aggregation mode {mode!r}; choose from {AGG_MODES}")
    if empty_rows not in EMPTY_ROWS:
        raise ValueError(f"empty_rows={empty_rows!r}; choose from {EMPTY_ROWS}")
    if mode == "token-mean":
        return mask.astype(jnp.float32).sum()
    if empty_rows == "skip":
        return _rows_with_tokens(mask).sum()
    if token_mask is None:
        return jnp.float32(mask.shape[0])
    return _rows_with_tokens(token_mask).sum()


def aggregate(
    x,
    mask,
    mode: str = "token-mean",
    norm: float | None = None,
    *,
    empty_rows: str = "skip",
    token_mask=None,
):
    """(sum, denominator) of x [B, T] under mask [B, T]; the mean is sum / max(denominator, 1)."""
    den = aggregate_denominator(mask, mode, empty_rows=empty_rows, token_mask=token_mask)
    return aggregate_sum(x, mask, mode, norm), den


def safe_divide(total, denominator):
    return total / jnp.maximum(denominator, 1.0)


__all__ = [
    "AGG_MODES",
    "EMPTY_ROWS",
    "aggregate",
    "aggregate_sum",
    "aggregate_denominator",
    "safe_divide",
]
