"""The decode loop's carry: what `memjax.sampling.loop` steps and `compaction` regroups."""

from __future__ import annotations

import dataclasses

import jax

from memjax.models.kv_cache import KVCache


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class DecodeCarry:
    """The decode loop's state between steps; `step` is the next output column to fill."""

    step: jax.Array  # [] int32
    cache: KVCache
    token: jax.Array  # [B] int32: each row's last sampled token (fed at the next step)
    position: jax.Array  # [B] int32: its position
    rows: jax.Array  # [B] int32: each row's index in the call's output (its draws' id), -1 filler
    tokens: jax.Array  # [B, max_new] int32
    logprobs: jax.Array  # [B, max_new] f32
    window: jax.Array  # [B, W] int32: the latest W tokens (for stop sequences)
    done: jax.Array  # [B] bool
    reason: jax.Array  # [B] int32
    lengths: jax.Array  # [B] int32


__all__ = ["DecodeCarry"]
