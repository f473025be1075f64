"""The shared prefix, row by row: how rows that open with the same untrained tokens are found
(common_prefix_length, shared_length, prefix_groups), laid out (PREFIX_PAD) and run once
(prefix_predictors); its users are the RL update (`memjax.rl.shared_prefix`), SFT's batches
(`memjax.sft.batches`) and the sampler (`memjax.sampling.prefix`, its prefill blocks).

A Memory-R1 manager row is about 1,200 tokens with 70 of them trained, and its first ~830 (the
system turn and the fixed instructions before the memory list) are the same in every manager
row: a plain batch of 4 rows spends 70% of its token-forwards on copies of them. Here a batch
whose rows share their first P tokens, none of them trained, runs the decoder on the prefix
once (batch 1), repeats its keys and values across the rows, and runs each row's remainder
over them, as the sampler does with a GRPO group's prompt. The repeat's gradient is
the sum over rows, so the loss and the gradients are the plain batch's (up to the order of f32
sums), at 830 + 4 x 370 token-forwards in place of 4 x 1,200.

    P = shared_length(token_rows, loss_masks, granularity=64, minimum=256)   # 0: nothing shared
    states = prefix_predictors(params, cfg, prefix, tokens, token_mask)     # prefix [1, P]
    keys = prefix_groups(token_rows, loss_masks, 256)   # SFT: rows with equal keys share batches
    n = common_prefix_length(prompts)                   # the sampler: tokens all prompts open with

P is rounded down to a multiple of `granularity` so that few (prefix, remainder) shapes are
compiled; the tokens past it go with the remainder.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models import decoder
from memjax.models.kv_cache import init_cache, repeat_rows

PREFIX_PAD = -1  # fills a prefix shorter than its batch's prefix width; never a token id


def common_prefix_length(prompts: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every prompt has in common."""
    shortest = min(len(p) for p in prompts)
    first = prompts[0]
    for i in range(shortest):
        token = first[i]
        if any(p[i] != token for p in prompts[1:]):
            return i
    return shortest


def shared_length(
    token_rows: Sequence[np.ndarray],
    loss_masks: Sequence[np.ndarray],
    *,
    granularity: int,
    minimum: int,
) -> int:
    """The longest prefix every row has and none trains, rounded down to `granularity` and
    leaving each row at least one token; 0 when that is shorter than `minimum`."""
    first = np.asarray(token_rows[0])
    n = min(len(t) for t in token_rows) - 1
    for tokens, mask in zip(token_rows, loss_masks):
        trained = np.flatnonzero(mask)
        if len(trained):  # a trained token's log-prob must come from its own row's pass
            n = min(n, int(trained[0]))
        differ = np.flatnonzero(np.asarray(tokens[:n]) != first[:n])
        if len(differ):
            n = int(differ[0])
    n = max(n, 0) // granularity * granularity
    return n if n >= max(minimum, 1) else 0


def prefix_groups(token_rows, loss_masks, length: int) -> list[bytes | None]:
    """Each row's first `length` tokens as bytes (rows with equal keys share at least that
    prefix, so they can share batches), or None for a row no longer than it or training one of
    its tokens."""
    keys: list[bytes | None] = []
    for tokens, mask in zip(token_rows, loss_masks):
        usable = len(tokens) > length and not np.any(mask[:length])
        keys.append(np.asarray(tokens[:length], np.int32).tobytes() if usable else None)
    return keys


def prefix_predictors(
    params,
    cfg,
    prefix: jax.Array,
    tokens: jax.Array,
    token_mask: jax.Array,
    *,
    mesh=None,
    rules=None,
) -> jax.Array:
    """The final-norm state that predicts each token, [B, L, D]: for tokens[b, t] the state
    after prefix + tokens[b, :t] (for t = 0, the prefix's last state).

    prefix [1, P] int32 (shared by every row), possibly right-padded with PREFIX_PAD (a batch
    whose micro-batches share prefixes of different lengths has one shape for all of them);
    tokens, token_mask [B, L], right-padded.
    """
    B, L = tokens.shape
    P = prefix.shape[1]
    real = prefix != PREFIX_PAD  # [1, P]
    n = jnp.sum(real, dtype=jnp.int32)  # the prefix's own length
    positions = jnp.arange(P, dtype=jnp.int32)[None]  # [1, P]
    cache = init_cache(cfg, 1, P)  # the prefix's slots only: the remainder just reads them
    prefix_hidden, cache = decoder.forward_hidden(
        params,
        jnp.where(real, prefix, 0),
        positions,
        cfg,
        token_mask=real,
        cache=cache,
        fresh_cache=True,
        mesh=mesh,
        rules=rules,
    )  # [1, P, D]; the cache holds the prefix's keys and values at slots [0, n), valid there
    cache = repeat_rows(cache, B)
    hidden, _ = decoder.forward_hidden(
        params,
        tokens,
        decoder.positions_from_mask(token_mask, offset=n),
        cfg,
        token_mask=token_mask,
        cache=cache,
        read_only_cache=True,
        mesh=mesh,
        rules=rules,
    )  # [B, L, D]
    last = jax.lax.dynamic_slice_in_dim(prefix_hidden, n - 1, 1, axis=1)  # [1, 1, D]
    first = jnp.broadcast_to(last, (B, 1, hidden.shape[-1]))
    return jnp.concatenate([first, hidden[:, :-1]], axis=1)


__all__ = [
    "PREFIX_PAD",
    "common_prefix_length",
    "shared_length",
    "prefix_groups",
    "prefix_predictors",
]
