"""Per-token log-probabilities and entropies, computed in vocabulary chunks.

The trainer never materialises [B, T, V] logits: a `lax.scan` walks the unembedding in chunks of
C columns, keeping a running max, sum of exponentials, exp-weighted logit sum and the target's
logit per token (an online log-sum-exp), and the scan body is rematerialised so the backward pass
recomputes each [B, T, C] slab instead of storing it. Memory is O(B T C), not O(B T V). The
target logit is picked inside the chunk (a select, not a gather of unembedding columns), so a
vocab-sharded unembedding never has to be gathered.

Alignment: logp[:, t] = log p(tokens[t] | tokens[:t]) at `temperature`, the same convention as
the sampler's log-probs of the tokens it produced; position 0 has no prediction and gets 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.shared_prefix import prefix_predictors
from memjax.parallel import constrain

_NEG = -1e30  # finite "minus infinity": exp(_NEG - m) is 0 and never NaN


def chunked_logprobs(
    hidden: jax.Array,
    w: jax.Array,
    targets: jax.Array,
    *,
    temperature: float = 1.0,
    chunk: int = 4096,
    with_entropy: bool = True,
    vocab_major: bool = False,
    mesh=None,
    rules=None,
) -> tuple[jax.Array, jax.Array | None]:
    """log softmax(hidden @ unembedding / temperature)[targets] and the softmax entropy,
    chunked over V.

    hidden [B, T, D]; w: the unembedding, [D, V], or [V, D] with `vocab_major` (a tied
    embedding table, used as stored: no transposed copy per step); targets [B, T] int.
    Returns (logp [B, T], entropy [B, T] or None), both f32. Tokens are flattened to one
    [B*T, D] operand so every product is a plain 2-D GEMM (XLA on CPU otherwise transposes the
    [B*T, C] logit gradients for the unembedding's gradient).
    """
    B, T, D = hidden.shape
    V = w.shape[0] if vocab_major else w.shape[1]
    C = min(chunk, V)
    n_chunks = -(-V // C)
    pad = n_chunks * C - V
    w = w.astype(hidden.dtype)
    if vocab_major:
        w_chunks = jnp.pad(w, ((0, pad), (0, 0))).reshape(n_chunks, C, D)  # [n, C, D]
        # Gather the fsdp shards once (as FSDP does for every weight), columns on tensor.
        w_chunks = constrain(w_chunks, (None, "vocab", None), mesh, rules)
        chunk_logits = lambda h, w_c: jax.lax.dot_general(
            h, w_c, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
    else:
        w_chunks = jnp.pad(w, ((0, 0), (0, pad))).reshape(D, n_chunks, C).transpose(1, 0, 2)
        w_chunks = constrain(w_chunks, (None, None, "vocab"), mesh, rules)  # [n, D, C]
        chunk_logits = lambda h, w_c: jnp.dot(h, w_c, preferred_element_type=jnp.float32)
    h = hidden.reshape(B * T, D)
    flat_targets = targets.reshape(B * T)
    inv_t = 1.0 / temperature

    @jax.checkpoint
    def body(carry, xs):
        m, s, t, target_logit = carry  # [M] each: max, sum exp(l - m), sum exp(l - m) l, l_y
        w_c, start = xs  # [C, D] or [D, C]; []
        logits = chunk_logits(h, w_c) * inv_t  # [M, C]
        column = start + jnp.arange(C)  # [C]
        if pad:  # only the last chunk has padded columns; they must not count
            logits = jnp.where(column < V, logits, _NEG)
        hit = column == flat_targets[:, None]  # [M, C]
        target_logit = target_logit + jnp.where(hit, logits, 0.0).sum(axis=-1)
        m_new = jnp.maximum(m, logits.max(axis=-1))
        scale = jnp.exp(m - m_new)
        e = jnp.exp(logits - m_new[:, None])  # [M, C]
        s = s * scale + e.sum(axis=-1)
        if with_entropy:
            real = jnp.where(column < V, logits, 0.0) if pad else logits
            t = t * scale + (e * real).sum(axis=-1)
        return (m_new, s, t, target_logit), None

    M = B * T
    init = (jnp.full((M,), _NEG, jnp.float32), jnp.zeros((M,), jnp.float32))
    init = (*init, jnp.zeros((M,), jnp.float32), jnp.zeros((M,), jnp.float32))
    starts = jnp.arange(n_chunks, dtype=jnp.int32) * C
    (m, s, t, target_logit), _ = jax.lax.scan(body, init, (w_chunks, starts))
    lse = m + jnp.log(s)  # [M]
    logp = (target_logit - lse).reshape(B, T)
    entropy = (lse - t / s).reshape(B, T) if with_entropy else None
    return logp, entropy


def _shift_right(x: jax.Array) -> jax.Array:
    """[B, T] predictions of the next token -> aligned with the token they predict."""
    return jnp.pad(x[:, :-1], ((0, 0), (1, 0)))


def _score(params, cfg, states, targets, temperature, chunk, with_entropy, mesh, rules):
    """chunked_logprobs of `targets` from `states` through the model's unembedding."""
    w, vocab_major = decoder.unembedding(params, cfg)
    return chunked_logprobs(
        states,
        w,
        targets,
        vocab_major=vocab_major,
        temperature=temperature,
        chunk=chunk,
        with_entropy=with_entropy,
        mesh=mesh,
        rules=rules,
    )


def sequence_logprobs(
    params,
    cfg: DecoderConfig,
    tokens: jax.Array,
    token_mask: jax.Array,
    *,
    temperature: float = 1.0,
    chunk: int = 4096,
    with_entropy: bool = False,
    at: jax.Array | None = None,
    prefix: jax.Array | None = None,
    mesh=None,
    rules=None,
) -> tuple[jax.Array, jax.Array | None]:
    """Log-probs [B, T] (and entropies [B, T]) of each token given its prefix.

    tokens, token_mask: [B, T]; padding (left, right or in between) is excluded from attention
    and from positions, so a padded row scores exactly as it would unpadded.

    at [B, K] int: score only these positions (`trained_positions`) and return [B, K].
    Only they go through the unembedding: a Memory-R1 row trains ~128 of its 2,048 tokens,
    and the unembedding of the rest would be a fifth of the step's FLOPs for nothing.

    prefix [1, P] int (needs `at`): every row continues these P tokens, which run once and
    whose keys and values every row attends to (`memjax.models.shared_prefix`); tokens[b, 0]
    is then predicted by the prefix's last state, so position 0 is scored too.
    """
    if prefix is not None:
        if at is None:
            raise ValueError("a shared prefix scores the positions `at` only")
        predictors = prefix_predictors(
            params, cfg, prefix, tokens, token_mask, mesh=mesh, rules=rules
        )  # [B, T, D]: the state that predicts token t
        states = jnp.take_along_axis(predictors, at[..., None], axis=1)  # [B, K, D]
        states = constrain(states, ("batch", "seq", None), mesh, rules)
        targets = jnp.take_along_axis(tokens, at, axis=1)  # [B, K]
        return _score(params, cfg, states, targets, temperature, chunk, with_entropy, mesh, rules)
    positions = decoder.positions_from_mask(token_mask)
    hidden, _ = decoder.forward_hidden(
        params, tokens, positions, cfg, token_mask=token_mask, mesh=mesh, rules=rules
    )  # [B, T, D]
    hidden = constrain(hidden, ("batch", "seq", None), mesh, rules)
    if at is None:
        states = hidden  # position t predicts token t + 1
        targets = jnp.roll(tokens, -1, axis=1)  # [B, T]
    else:
        before = jnp.maximum(at - 1, 0)  # [B, K]: the state that predicts token `at`
        states = jnp.take_along_axis(hidden, before[..., None], axis=1)  # [B, K, D]
        states = constrain(states, ("batch", "seq", None), mesh, rules)
        targets = jnp.take_along_axis(tokens, at, axis=1)  # [B, K]
    logp, entropy = _score(
        params, cfg, states, targets, temperature, chunk, with_entropy, mesh, rules
    )
    if at is not None:  # position 0 predicts nothing (as the full rows' shift gives it)
        first = at == 0
        logp = jnp.where(first, 0.0, logp)
        return logp, None if entropy is None else jnp.where(first, 0.0, entropy)
    logp = _shift_right(logp)
    if entropy is not None:
        entropy = _shift_right(entropy)
    return logp, entropy


def trained_positions(loss_mask: np.ndarray, width: int) -> dict[str, np.ndarray]:
    """Where each row's trained tokens are, for `sequence_logprobs(at=)`: loss_positions
    [B, width] int32 (in order, padded with 0) and loss_valid [B, width] bool. `width` must be
    at least the most trained tokens of any row."""
    counts = loss_mask.sum(axis=1)  # [B]
    if counts.max(initial=0) > width:
        raise ValueError(f"a row trains {counts.max()} tokens, more than width {width}")
    positions = np.zeros((len(loss_mask), width), np.int32)
    for b, row in enumerate(loss_mask):
        positions[b, : counts[b]] = np.flatnonzero(row)
    valid = np.arange(width)[None, :] < counts[:, None]
    return {"loss_positions": positions, "loss_valid": valid}


def position_width(most_trained: int, seq_len: int, floor: int = 64) -> int:
    """K for `trained_positions`: a power of two (at least `floor`, at most seq_len) that holds
    `most_trained` tokens, so a run compiles few step shapes however its responses vary."""
    width = floor
    while width < most_trained:
        width *= 2
    return min(width, seq_len)


def scatter_positions(values, at, valid, mask, fill):
    """values [B, K] at positions `at` [B, K] (where `valid`) back in a [B, T] array: `fill`
    [B, T] wherever `mask` [B, T] (the positions `at` lists) is False. Padding slots add 0, so
    they may repeat a position."""
    rows = jnp.arange(values.shape[0])[:, None]  # [B, 1]
    placed = jnp.zeros(fill.shape, values.dtype).at[rows, at].add(jnp.where(valid, values, 0))
    return jnp.where(mask, placed, fill)


LOGPROB_ROWS_PER_DEVICE = 4  # rows per device per chunk of the old / reference log-prob pass


def make_logprob_fn(
    cfg: DecoderConfig,
    *,
    temperature=1.0,
    chunk=4096,
    mesh=None,
    rules=None,
    rows_per_device: int = LOGPROB_ROWS_PER_DEVICE,
):
    """A jitted (params, tokens, token_mask, at=None, prefix=None) -> logp [B, T] (or [B, K] at
    the positions `at` [B, K], as `sequence_logprobs`): old and reference log-probs.

    The rows go through in chunks of `rows_per_device` per batch shard (a `lax.map` over a
    strided split, as the train step's micro-batches, so every chunk stays evenly sharded):
    the trainer calls this over all the rows of a step at once, and one forward pass over
    them all needs [B, T, F] activations at once, where a chunk needs its own rows' (the
    compiled sizes at Qwen2.5-3B's GRPO step: docs/scale.md). A batch that does
    not split into such chunks runs whole. `logprob_chunks` says how many chunks a batch
    makes.

    prefix [B, P] (with `at`): each row's first P tokens, cut from `tokens` and the same for
    every row of a chunk (`memjax.rl.shared_prefix`): each chunk runs them once.
    """
    shards = 1 if mesh is None else mesh.shape["data"] * mesh.shape["fsdp"]

    def one(params, tokens, token_mask, at=None, prefix=None):
        logp, _ = sequence_logprobs(
            params,
            cfg,
            tokens,
            token_mask,
            temperature=temperature,
            chunk=chunk,
            at=at,
            prefix=None if prefix is None else prefix[:1],
            mesh=mesh,
            rules=rules,
        )
        return logp

    @jax.jit
    def fn(params, tokens, token_mask, at=None, prefix=None):
        B = tokens.shape[0]
        M = logprob_chunks(B, rows_per_device * shards)
        if M == 1:
            return one(params, tokens, token_mask, at, prefix)
        split = lambda x: jnp.swapaxes(x.reshape(B // M, M, x.shape[1]), 0, 1)  # [M, B/M, .]
        rows = (tokens, token_mask, at, prefix)

        def body(xs):
            return one(params, *(constrain(x, ("batch", "seq"), mesh, rules) for x in xs))

        logp = jax.lax.map(body, tuple(split(x) for x in rows if x is not None))  # [M, B/M, K]
        return jnp.swapaxes(logp, 0, 1).reshape(B, -1)

    return fn


def logprob_chunks(rows: int, rows_per_chunk: int) -> int:
    """How many strided chunks `make_logprob_fn` runs `rows` rows in (1: all at once)."""
    if rows_per_chunk >= rows or rows % rows_per_chunk:
        return 1
    return rows // rows_per_chunk


__all__ = [
    "LOGPROB_ROWS_PER_DEVICE",
    "chunked_logprobs",
    "logprob_chunks",
    "make_logprob_fn",
    "position_width",
    "scatter_positions",
    "sequence_logprobs",
    "trained_positions",
]
