"""Per-token RL losses and their aggregation into (sum, denominator) pairs.

Every per-token function takes [B, T] arrays and returns [B, T]. `aggregate` turns a per-token
quantity into a (sum, denominator) pair: the loss of a mini-batch is sum / denominator, where the
denominator is computed once from the *whole* mini-batch's mask (over all micro-batches and
devices) and the sums of the micro-batches are added. Because the denominator does not depend on
parameters, the accumulated gradient is exactly the gradient of the full-batch loss.

Formulas follow verl / TRL (see reference/jax_anchors.md sections 8-10):
  policy: max(-A r, -A clip(r, 1-eps_low, 1+eps_high)), optional dual clip min(., -c A) for A<0
  KL:     k1 = logp - ref, k2 = (logp - ref)^2 / 2, k3 = exp(ref - logp) - (ref - logp) - 1
  value:  max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) / 2
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "k2", "k3", "k3+")
LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 5e8: a finite ratio even for badly stale samples


@dataclasses.dataclass(frozen=True)
class PolicyLossConfig:
    eps_low: float = 0.2
    eps_high: float | None = None  # None: same as eps_low; DAPO uses 0.28
    dual_clip: float | None = None  # c > 1 (verl/MemSearcher: 3.0); None disables it
    kl_coef: float = 0.0  # beta; 0 skips the reference model entirely
    kl_kind: str = "k3"  # k3 is the default loss term: k1's expected gradient is zero on-policy
    kl_clamp: float | None = 10.0  # symmetric clamp on the per-token KL estimate
    entropy_coef: float = 0.0
    agg_mode: str = "token-mean"
    agg_norm: float | None = None  # seq-mean-token-sum-norm's constant (default: T)

    def __post_init__(self):
        if self.agg_mode not in AGG_MODES:
            raise ValueError(f"agg_mode={self.agg_mode!r}; choose from {AGG_MODES}")
        if self.kl_kind not in KL_KINDS:
            raise ValueError(f"kl_kind={self.kl_kind!r}; choose from {KL_KINDS}")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"dual_clip={self.dual_clip} must be > 1")


# ------------------------------------------------------------------------------ policy


def clipped_policy_loss(
    logp: jax.Array,
    old_logp: jax.Array,
    advantages: jax.Array,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Per-token PPO-clip loss [B, T] and per-token diagnostics (ratio, clipped, dual_clipped).

    For A > 0 the ratio is capped at 1 + eps_high (no gain from pushing further); for A < 0 at
    1 - eps_low. The dual clip bounds the loss of A < 0 tokens whose ratio exploded: -c A.
    """
    eps_high = eps_low if eps_high is None else eps_high
    log_ratio = jnp.clip(logp - old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = jnp.exp(log_ratio)  # [B, T]
    unclipped = -advantages * ratio
    clipped = -advantages * jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    loss = jnp.maximum(unclipped, clipped)
    info = {"ratio": ratio, "clipped": clipped > unclipped}
    if dual_clip is not None:
        bound = -advantages * dual_clip
        dual = (advantages < 0) & (loss > bound)
        loss = jnp.where(dual, bound, loss)
        info["dual_clipped"] = dual
    else:
        info["dual_clipped"] = jnp.zeros_like(info["clipped"])
    return loss, info


def kl_estimate(
    logp: jax.Array, ref_logp: jax.Array, kind: str = "k3", clamp: float | None = 10.0
) -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi. [B, T].

    "k3+" has k3's value and k2's (unbiased) gradient, by a straight-through trick.
    """
    if kind not in KL_KINDS:
        raise ValueError(f"kl kind {kind!r}; choose from {KL_KINDS}")
    delta = jnp.clip(ref_logp - logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # log(pi_ref / pi)
    k2 = 0.5 * delta**2
    if kind == "k1":
        kl = -delta
    elif kind == "k2":
        kl = k2
    else:
        kl = jnp.exp(delta) - delta - 1.0
        if kind == "k3+":
            kl = k2 + jax.lax.stop_gradient(kl - k2)
    if clamp is not None:
        kl = jnp.clip(kl, -clamp, clamp)
    return kl


def value_loss(
    values: jax.Array, old_values: jax.Array, returns: jax.Array, clip: float | None = 0.2
) -> tuple[jax.Array, jax.Array]:
    """PPO's clipped value loss per token [B, T], and where the clipped branch was taken."""
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped, jnp.zeros(values.shape, jnp.bool_)
    v_clip = old_values + jnp.clip(values - old_values, -clip, clip)
    clipped = (v_clip - returns) ** 2
    return 0.5 * jnp.maximum(unclipped, clipped), clipped > unclipped


# ------------------------------------------------------------------------------ aggregation


def _rows_with_tokens(mask: jax.Array) -> jax.Array:
    return (mask.sum(axis=-1) > 0).astype(jnp.float32)  # [B]


def aggregate_sum(
    x: jax.Array, mask: jax.Array, mode: str = "token-mean", norm: float | None = None
) -> jax.Array:
    """The numerator of `mode` for x [B, T] under mask [B, T] (a scalar)."""
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
        return row_sum.sum() / (x.shape[-1] if norm is None else norm)
    raise ValueError(f"aggregation mode {mode!r}; choose from {AGG_MODES}")


def aggregate_denominator(mask: jax.Array, mode: str = "token-mean") -> jax.Array:
    """The denominator of `mode`: trainable tokens (token-mean) or non-empty rows (seq-*)."""
    if mode not in AGG_MODES:
        raise ValueError(f"aggregation mode {mode!r}; choose from {AGG_MODES}")
    if mode == "token-mean":
        return mask.astype(jnp.float32).sum()
    return _rows_with_tokens(mask).sum()


def aggregate(x, mask, mode: str = "token-mean", norm: float | None = None):
    """(sum, denominator) of x [B, T] under mask [B, T]; the mean is sum / max(denominator, 1)."""
    return aggregate_sum(x, mask, mode, norm), aggregate_denominator(mask, mode)


def safe_divide(total, denominator):
    return total / jnp.maximum(denominator, 1.0)


# ------------------------------------------------------------------------------ objectives


def policy_objective(
    logp: jax.Array,
    entropy: jax.Array | None,
    batch: dict[str, jax.Array],
    cfg: PolicyLossConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The GRPO / PPO actor objective of one micro-batch as a sum (divide by the denominator).

    batch: loss_mask, advantages, old_logp and (when kl_coef > 0) ref_logp, all [B, T].
    Returns (loss_sum, metric sums); each metric is aggregated with the same mode, so metric / den
    is its mean. Token-count metrics (clip fractions, ratio stats) use plain token sums with the
    token count under "tokens".
    """
    mask = batch["loss_mask"]
    agg = lambda x: aggregate_sum(x, mask, cfg.agg_mode, cfg.agg_norm)
    tok = lambda x: aggregate_sum(x.astype(jnp.float32), mask, "token-mean")
    pg, info = clipped_policy_loss(
        logp,
        batch["old_logp"],
        batch["advantages"],
        eps_low=cfg.eps_low,
        eps_high=cfg.eps_high,
        dual_clip=cfg.dual_clip,
    )
    pg_sum = agg(pg)
    total = pg_sum
    metrics = {"pg_loss": pg_sum}
    if cfg.kl_coef:
        kl_sum = agg(kl_estimate(logp, batch["ref_logp"], cfg.kl_kind, cfg.kl_clamp))
        total = total + cfg.kl_coef * kl_sum
        metrics["kl"] = kl_sum
    if entropy is not None:
        ent_sum = agg(entropy)
        metrics["entropy"] = ent_sum
        if cfg.entropy_coef:
            total = total - cfg.entropy_coef * ent_sum
    ratio = jax.lax.stop_gradient(info["ratio"])
    metrics.update(
        loss=total,
        clip_frac=tok(info["clipped"]),
        dual_clip_frac=tok(info["dual_clipped"]),
        ratio_mean=tok(ratio),
        ratio_sq=tok(ratio**2),
        tokens=tok(jnp.ones_like(ratio)),
        ratio_max=jnp.max(jnp.where(mask > 0, ratio, -jnp.inf)),
        ratio_min=jnp.min(jnp.where(mask > 0, ratio, jnp.inf)),
    )
    if "sampler_logp" in batch:
        metrics["sampler_gap"] = tok(jnp.abs(jax.lax.stop_gradient(logp) - batch["sampler_logp"]))
    return total, metrics


__all__ = [
    "AGG_MODES",
    "KL_KINDS",
    "PolicyLossConfig",
    "clipped_policy_loss",
    "kl_estimate",
    "value_loss",
    "aggregate",
    "aggregate_sum",
    "aggregate_denominator",
    "safe_divide",
    "policy_objective",
]
