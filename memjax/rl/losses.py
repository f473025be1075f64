"""Per-token RL losses: the clipped policy loss, the KL estimators, the value loss.

Every per-token function takes [B, T] arrays and returns [B, T]; `policy_objective` sums them
into a micro-batch's loss with `memjax.training.aggregation` (the denominator comes from the
whole mini-batch).

Formulas follow verl's verl/trainer/ppo/core_algos.py (v0.5 line: `compute_policy_loss_vanilla`,
`kl_penalty` / `kl_penalty_forward`, `compute_value_loss`, `agg_loss`) and TRL's
trl/trainer/grpo_trainer.py `_compute_loss` where the two differ:
  policy: max(-A r, -A clip(r, 1-eps_low, 1+eps_high)), optional dual clip min(., -c A) for A<0
  KL:     k1 = logp - ref, k2 = (logp - ref)^2 / 2, k3 = exp(ref - logp) - (ref - logp) - 1,
          k3+: the value of k3 with the gradient of k2
  value:  max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) / 2
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from memjax.training.aggregation import AGG_MODES, EMPTY_ROWS, aggregate_sum

KL_KINDS = ("k1", "k2", "k3", "k3+")
KL_ALIASES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3", "low_var_kl+": "k3+"}
LOG_RATIO_CLAMP = 20.0  # exp(20) ~ 5e8: a finite ratio even for badly stale samples
# kl_clamp="verl": verl's kl_penalty_forward clamps only low_var_kl (k3) at +-10; k1, k2 are bare.
VERL_KL_CLAMPS: dict[str, float | None] = {"k1": None, "k2": None, "k3": 10.0}


@dataclasses.dataclass(frozen=True)
class PolicyLossConfig:
    eps_low: float = 0.2
    eps_high: float | None = None  # None: same as eps_low; DAPO uses 0.28
    dual_clip: float | None = None  # c > 1 (verl/MemSearcher: 3.0); None disables it
    kl_coef: float = 0.0  # beta; 0 skips the reference model entirely
    kl_kind: str = "k3"  # k3 is the default loss term: k1's expected gradient is zero on-policy
    kl_clamp: float | str | None = "verl"  # see kl_estimate: "verl" clamps only k3/k3+ at +-10
    entropy_coef: float = 0.0
    agg_mode: str = "token-mean"
    # seq-mean-token-sum-norm's constant: the response budget (the sampler's max_new_tokens), as
    # verl's agg_loss(loss_scale_factor=...), TRL's max_completion_length and the Dr.GRPO
    # authors' generate_max_length. Required by that mode; unused by the others.
    loss_scale_factor: int | None = None
    # Rows without trainable tokens in the seq-mean-* denominators: see aggregate_denominator.
    empty_rows: str = "skip"

    def __post_init__(self):
        if self.agg_mode not in AGG_MODES:
            raise ValueError(f"loss.agg_mode={self.agg_mode!r}; choose from {AGG_MODES}")
        kind = KL_ALIASES.get(self.kl_kind, self.kl_kind)
        if kind not in KL_KINDS:
            raise ValueError(f"loss.kl_kind={self.kl_kind!r}; choose from {KL_KINDS}")
        _check_kl_clamp(self.kl_clamp)
        for name in ("kl_coef", "entropy_coef", "eps_low"):
            if not getattr(self, name) >= 0:  # a negative one rewards what it should penalise
                raise ValueError(f"loss.{name}={getattr(self, name)}: must be >= 0")
        if self.eps_high is not None and not self.eps_high >= 0:
            raise ValueError(f"loss.eps_high={self.eps_high}: must be >= 0 (or None)")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ValueError(f"loss.dual_clip={self.dual_clip} must be > 1")
        if self.empty_rows not in EMPTY_ROWS:
            raise ValueError(f"loss.empty_rows={self.empty_rows!r}; choose from {EMPTY_ROWS}")
        if self.agg_mode == "seq-mean-token-sum-norm" and not (
            isinstance(self.loss_scale_factor, int) and self.loss_scale_factor > 0
        ):
            raise ValueError(
                f"loss.loss_scale_factor={self.loss_scale_factor!r}: agg_mode "
                "seq-mean-token-sum-norm needs the response budget as a positive int "
                "(set it to sampling.max_new_tokens)"
            )


def _check_kl_clamp(clamp) -> None:
    if clamp is None or clamp == "verl":
        return
    if isinstance(clamp, str) or not clamp > 0:
        raise ValueError(f"loss.kl_clamp={clamp!r}; use 'verl', None or a positive number")


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
    logp: jax.Array, ref_logp: jax.Array, kind: str = "k3", clamp: float | str | None = "verl"
) -> jax.Array:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi. [B, T].

    Follows verl's `kl_penalty` / `kl_penalty_forward` (verl/trainer/ppo/core_algos.py, v0.5):
      k1 = logp - ref and k2 = (logp - ref)^2 / 2, on the bare log-ratio;
      k3 = exp(d) - d - 1 with d = ref - logp clamped to +-20 first (exp must stay finite);
      "k3+" has k3's (clamped) value and k2's gradient, k2 - sg(k2) + sg(k3): the gradient is
      always logp - ref, however far the value is clamped.
    kind also takes verl's names: "kl", "mse", "low_var_kl", "low_var_kl+".
    clamp: "verl" clamps as verl does, k3 (and k3+'s value) at +-10 and k1, k2 not at all; a
    number c clamps the value of any kind at +-c (zero gradient beyond, except for k3+, whose
    gradient is k2's); None clamps nothing.
    """
    kind = KL_ALIASES.get(kind, kind)
    if kind not in KL_KINDS:
        raise ValueError(f"kl kind {kind!r}; choose from {KL_KINDS}")
    _check_kl_clamp(clamp)
    base = kind.removesuffix("+")
    log_ratio = logp - ref_logp  # log(pi / pi_ref) [B, T]
    k2 = 0.5 * log_ratio**2
    if base == "k1":
        value = log_ratio
    elif base == "k2":
        value = k2
    else:
        delta = jnp.clip(-log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # log(pi_ref / pi)
        value = jnp.exp(delta) - delta - 1.0
    bound = VERL_KL_CLAMPS[base] if clamp == "verl" else clamp
    if bound is not None:
        value = jnp.clip(value, -bound, bound)
    if kind.endswith("+"):
        value = k2 - jax.lax.stop_gradient(k2) + jax.lax.stop_gradient(value)
    return value


def value_loss(
    values: jax.Array, old_values: jax.Array, returns: jax.Array, clip: float | None = 0.2
) -> tuple[jax.Array, jax.Array]:
    """PPO's clipped value loss per token [B, T], and where the clipped branch was taken.

    As verl's `compute_value_loss` (verl/trainer/ppo/core_algos.py): V is clipped into
    [V_old - c, V_old + c] directly, so a V inside the band comes back bit for bit and only
    tokens whose V lies outside it can count as clipped (vf_clipfrac: the clipped loss is the
    larger). Building V_old + clip(V - V_old) instead would round inside the band and count
    tokens that were never clipped.
    """
    unclipped = (values - returns) ** 2
    if clip is None:
        return 0.5 * unclipped, jnp.zeros(values.shape, jnp.bool_)
    v_clip = jnp.clip(values, old_values - clip, old_values + clip)
    clipped = (v_clip - returns) ** 2
    return 0.5 * jnp.maximum(unclipped, clipped), clipped > unclipped


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
    agg = lambda x: aggregate_sum(x, mask, cfg.agg_mode, cfg.loss_scale_factor)
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
    "KL_ALIASES",
    "KL_KINDS",
    "VERL_KL_CLAMPS",
    "PolicyLossConfig",
    "clipped_policy_loss",
    "kl_estimate",
    "value_loss",
    "policy_objective",
]
