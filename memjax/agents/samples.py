"""From finished episodes to training rows for multi-context GRPO.

Every context of every trajectory is one row: its token ids, a loss mask that is 1 only on the
model's own tokens, the index of its trajectory (to broadcast the trajectory's advantage with
`memjax.rl.advantages.broadcast_to_contexts`) and whether it is the trajectory's final context
(the one the reward was computed on). Baselines with one growing context give one row each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memjax.agents.episode import EpisodeResult
from memjax.agents.transcript import ChatFormat, tokens_and_mask


@dataclass(frozen=True)
class ContextRows:
    token_ids: list[list[int]]  # B rows of varying length
    loss_mask: list[list[int]]
    context_trajectory: np.ndarray  # [B] int32, index into the N trajectories
    final_mask: np.ndarray  # [B] bool
    rewards: np.ndarray  # [N] float32, one per trajectory


def context_rows(results: Sequence[EpisodeResult], fmt: ChatFormat) -> ContextRows:
    """Rows for trajectories laid out as the caller's GRPO groups (contiguous groups of G)."""
    ids, masks, trajectory, final = [], [], [], []
    for n, result in enumerate(results):
        for j, context in enumerate(result.contexts):
            row_ids, row_mask = tokens_and_mask(context, fmt)
            ids.append(row_ids)
            masks.append(row_mask)
            trajectory.append(n)
            final.append(j == len(result.contexts) - 1)
    return ContextRows(
        token_ids=ids,
        loss_mask=masks,
        context_trajectory=np.asarray(trajectory, np.int32),
        final_mask=np.asarray(final, bool),
        rewards=np.asarray([r.reward for r in results], np.float32),
    )


def pad_rows(rows: ContextRows, pad_id: int, length: int | None = None) -> dict[str, np.ndarray]:
    """Right-padded `tokens` [B, T], `loss_mask` [B, T] and `attention_mask` [B, T]. A row longer
    than `length` is an error: silently cutting a context would train on a different one."""
    longest = max((len(r) for r in rows.token_ids), default=0)
    length = longest if length is None else length
    if longest > length:
        raise ValueError(f"a context has {longest} tokens, more than the padded length {length}")
    b = len(rows.token_ids)
    tokens = np.full((b, length), pad_id, np.int32)  # [B, T]
    loss_mask = np.zeros((b, length), np.int32)  # [B, T]
    attention = np.zeros((b, length), np.int32)  # [B, T]
    for i, (row_ids, row_mask) in enumerate(zip(rows.token_ids, rows.loss_mask)):
        tokens[i, : len(row_ids)] = row_ids
        loss_mask[i, : len(row_mask)] = row_mask
        attention[i, : len(row_ids)] = 1
    return {"tokens": tokens, "loss_mask": loss_mask, "attention_mask": attention}
