"""The SFT update: token NLL on the trained tokens, on the same micro-batched, sharded train
step (and optimizer chain) as RL's policy update.

    step = sft_train_step(cfg, optimizer, agg_mode="token-mean", num_micro_batches=2)
    state, metrics = step(state, batch)   # sft.batches.make_batch's arrays

The loss is aggregated in the modes RL uses too (`memjax.training.aggregation`): the denominator comes from
the whole batch's loss mask before the micro-batch scan, so micro-batching does not change the
gradient. Log-probs are the vocabulary-chunked ones of the RL step, at temperature 1, taken at
the trained tokens only.

token-mean over a length-bucketed batch has a bias the RL step does not: a batch holds rows of
one length only, so a batch of short answers (20 trained tokens a row) gives each of its tokens
ten times the weight a batch of long memory updates (200 a row) gives its own, and the decision
those short rows teach wins out of proportion (MemSearcher learned to answer without searching).
`tokens_per_row` (the training data's mean trained tokens per row) fixes the denominator at
rows x tokens_per_row, so every trained token of the data weighs the same whichever batch it
lands in, and the loss's expectation is the data's token mean.

A batch with "prefix" [B, P] (rows cut after a shared untrained prefix) runs the prefix once
(`memjax.models.shared_prefix`): the same loss and gradients for less compute.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.parallel import TRAIN_RULES, normalize_rules
from memjax.training import aggregation
from memjax.training.logprobs import sequence_logprobs
from memjax.training.train_step import TrainStep


def trained_logprobs(params, cfg, mb, *, chunk: int, mesh=None, rules=None) -> jax.Array:
    """log p of each row's trained tokens, [b, K] at mb["loss_positions"] (valid where
    mb["loss_valid"]).

    Only those K positions go through the unembedding: a manager row trains ~70 of its ~1,200
    tokens, and scoring all of them against the 49k-word vocabulary would cost a fifth of the
    step. A batch with "prefix" runs it once (`memjax.models.shared_prefix`).
    """
    logp, _ = sequence_logprobs(
        params,
        cfg,
        mb["tokens"],
        mb["token_mask"],
        chunk=chunk,
        at=mb["loss_positions"],
        prefix=mb["prefix"][:1] if "prefix" in mb else None,
        mesh=mesh,
        rules=rules,
    )
    return logp  # [b, K]


def nll_objective(cfg, agg_mode: str, vocab_chunk: int, mesh=None, rules=None):
    """(params, micro_batch) -> (loss_sum, metric_sums) for TrainStep."""
    model_rules = normalize_rules(rules) if mesh is not None else None

    def objective(params, mb):
        logp = trained_logprobs(
            params, cfg, mb, chunk=vocab_chunk, mesh=mesh, rules=model_rules
        )  # [b, K]: log p(trained token k | everything before it)
        mask = mb["loss_valid"]  # [b, K]: the row's trained tokens, as mb["loss_mask"] has them
        total = aggregation.aggregate_sum(-logp, mask, agg_mode)
        token_nll = aggregation.aggregate_sum(-logp, mask, "token-mean")
        return total, {
            "loss": total,
            "nll_sum": token_nll,
            "tokens": mask.astype(jnp.float32).sum(),
        }

    return objective


def _finalize(sums: dict, den):
    tokens = jnp.maximum(sums["tokens"], 1.0)
    return {
        "loss": sums["loss"] / jnp.maximum(den, 1.0),
        "token_nll": sums["nll_sum"] / tokens,
        "tokens": sums["tokens"],
    }


def _denominator(agg_mode: str, tokens_per_row: float | None):
    if agg_mode != "token-mean" or tokens_per_row is None:
        return lambda b: aggregation.aggregate_denominator(b["loss_mask"], agg_mode)
    # Rows with a token: the empty rows that pad a batch to the mesh do not count.
    return lambda b: (b["token_mask"].sum(axis=-1) > 0).sum() * jnp.float32(tokens_per_row)


def sft_train_step(
    cfg,
    optimizer,
    *,
    agg_mode: str = "token-mean",
    tokens_per_row: float | None = None,
    vocab_chunk: int = 4096,
    num_micro_batches: int = 1,
    mesh=None,
    rules=TRAIN_RULES,
    state_shardings=None,
    donate: bool | None = None,
    compose=None,
    frozen_shardings=None,
) -> TrainStep:
    """The NLL step; `tokens_per_row` as the module says (None: the batch's own token count);
    `compose` and `frozen_shardings` as TrainStep's (LoRA:
    `memjax.training.lora_state.policy_step_kwargs`)."""
    if agg_mode not in aggregation.AGG_MODES:
        raise ValueError(f"agg_mode={agg_mode!r}: choose from {aggregation.AGG_MODES}")
    if tokens_per_row is not None and not tokens_per_row > 0:
        raise ValueError(f"tokens_per_row={tokens_per_row!r}: must be > 0")
    return TrainStep(
        nll_objective(cfg, agg_mode, vocab_chunk, mesh, rules),
        optimizer,
        denominator=_denominator(agg_mode, tokens_per_row),
        finalize=_finalize,
        num_micro_batches=num_micro_batches,
        mesh=mesh,
        rules=rules,
        state_shardings=state_shardings,
        donate=donate,
        compose=compose,
        frozen_shardings=frozen_shardings,
    )


__all__ = ["sft_train_step", "nll_objective"]
