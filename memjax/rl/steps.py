"""The RL train steps over the shared `TrainStep`: the GRPO / PPO actor and the PPO critic.

Each builds an objective `(params, micro_batch) -> (loss_sum, metric_sums)` from the RL losses
(`memjax.rl.losses`) and hands it to `memjax.training.train_step.TrainStep`, which accumulates
micro-batches and applies one optimizer update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from memjax.models.config import DecoderConfig
from memjax.parallel import TRAIN_RULES, normalize_rules
from memjax.rl import losses
from memjax.rl.critic import critic_values
from memjax.training.aggregation import aggregate_denominator, aggregate_sum
from memjax.training.logprobs import scatter_positions, sequence_logprobs
from memjax.training.train_step import TrainState, TrainStep


def finalize_policy_metrics(sums: dict, den: jax.Array) -> dict:
    per_row = {"loss", "pg_loss", "kl", "entropy"}
    tokens = jnp.maximum(sums["tokens"], 1.0)
    out = {k: sums[k] / jnp.maximum(den, 1.0) for k in per_row if k in sums}
    for k in ("clip_frac", "dual_clip_frac", "ratio_mean", "sampler_gap"):
        if k in sums:
            out[k] = sums[k] / tokens
    out["ratio_std"] = jnp.sqrt(jnp.maximum(sums["ratio_sq"] / tokens - out["ratio_mean"] ** 2, 0))
    out["ratio_max"] = sums["ratio_max"]
    out["ratio_min"] = sums["ratio_min"]
    out["tokens"] = sums["tokens"]
    return out


def policy_train_step(
    cfg: DecoderConfig,
    loss_cfg: losses.PolicyLossConfig,
    optimizer: optax.GradientTransformation,
    *,
    temperature: float = 1.0,
    vocab_chunk: int = 4096,
    num_micro_batches: int = 1,
    mesh: Mesh | None = None,
    rules=TRAIN_RULES,
    state_shardings: TrainState | None = None,
    donate: bool | None = None,
    compose: Callable[[Any, Any], Any] | None = None,
    frozen_shardings: Any = None,
) -> TrainStep:
    """The GRPO / PPO actor step. Batch: tokens, token_mask, loss_mask, advantages, old_logp
    ([B, T] each), ref_logp when loss_cfg.kl_coef > 0, optionally sampler_logp (for the gap)
    and loss_positions / loss_valid [B, K] (`memjax.training.logprobs.trained_positions`: then only
    the trained tokens go through the unembedding), optionally "prefix" [B, P] with the rows
    cut after it (`memjax.rl.shared_prefix`: each micro-batch runs it once). `compose`: see TrainStep (LoRA:
    `memjax.training.lora_state.policy_step_kwargs`)."""
    model_rules = normalize_rules(rules) if mesh is not None else None

    def objective(params, mb):
        at = mb.get("loss_positions")  # [b, K] or None: every position is scored
        logp, entropy = sequence_logprobs(
            params,
            cfg,
            mb["tokens"],
            mb["token_mask"],
            temperature=temperature,
            chunk=vocab_chunk,
            with_entropy=True,
            at=at,
            prefix=mb["prefix"][:1] if "prefix" in mb else None,  # memjax.rl.shared_prefix
            mesh=mesh,
            rules=model_rules,
        )
        if at is not None:  # [b, K] -> [b, T]; untrained positions hold old_logp (ratio 1)
            valid, mask = mb["loss_valid"], mb["loss_mask"] > 0
            old = jax.lax.stop_gradient(mb["old_logp"])
            logp = scatter_positions(logp, at, valid, mask, old)
            entropy = scatter_positions(entropy, at, valid, mask, jnp.zeros_like(old))
        return losses.policy_objective(logp, entropy, mb, loss_cfg)

    return TrainStep(
        objective,
        optimizer,
        denominator=lambda b: aggregate_denominator(
            b["loss_mask"],
            loss_cfg.agg_mode,
            empty_rows=loss_cfg.empty_rows,
            token_mask=b["token_mask"],
        ),
        finalize=finalize_policy_metrics,
        num_micro_batches=num_micro_batches,
        mesh=mesh,
        rules=rules,
        state_shardings=state_shardings,
        donate=donate,
        compose=compose,
        frozen_shardings=frozen_shardings,
    )


def critic_train_step(
    cfg: DecoderConfig,
    optimizer: optax.GradientTransformation,
    *,
    value_clip: float | None = 0.2,
    num_micro_batches: int = 1,
    mesh: Mesh | None = None,
    rules=TRAIN_RULES,
    state_shardings: TrainState | None = None,
    donate: bool | None = None,
    compose: Callable[[Any, Any], Any] | None = None,
    frozen_shardings: Any = None,
) -> TrainStep:
    """The PPO critic step (token-mean clipped value loss). Batch: tokens, token_mask, loss_mask,
    old_values, returns ([B, T] each). `compose`: see TrainStep (LoRA:
    `memjax.rl.critic.critic_step_kwargs`)."""
    model_rules = normalize_rules(rules) if mesh is not None else None

    def objective(params, mb):
        values = critic_values(
            params, cfg, mb["tokens"], mb["token_mask"], mesh=mesh, rules=model_rules
        )
        loss, clipped = losses.value_loss(values, mb["old_values"], mb["returns"], value_clip)
        mask = mb["loss_mask"]
        tok = lambda x: aggregate_sum(x.astype(jnp.float32), mask, "token-mean")
        total = tok(loss)
        return total, {
            "value_loss": total,
            "value_clip_frac": tok(clipped),
            "value_mean": tok(jax.lax.stop_gradient(values)),
        }

    def finalize(sums, den):
        d = jnp.maximum(den, 1.0)
        return {k: v / d for k, v in sums.items()}

    return TrainStep(
        objective,
        optimizer,
        denominator=lambda b: aggregate_denominator(b["loss_mask"], "token-mean"),
        finalize=finalize,
        num_micro_batches=num_micro_batches,
        mesh=mesh,
        rules=rules,
        state_shardings=state_shardings,
        donate=donate,
        compose=compose,
        frozen_shardings=frozen_shardings,
    )


__all__ = ["policy_train_step", "critic_train_step", "finalize_policy_metrics"]
