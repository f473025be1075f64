"""Advantage estimators: group-normalised (GRPO, Dr.GRPO), GAE (PPO), and the multi-context
broadcast of MemSearcher.

Shapes: N trajectories laid out as contiguous groups of G (the G samples of one prompt), B
training rows (contexts) of T tokens. Everything is a pure jnp function, so it runs in or out of
jit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SCALINGS = ("none", "group", "batch")
SINGLETON_GROUPS = ("zero", "verl")


def group_advantages(
    rewards: jax.Array,
    group_size: int,
    *,
    scaling: str = "group",
    ddof: int = 1,
    epsilon: float = 1e-6,
    singleton_group: str = "zero",
) -> jax.Array:
    """(r - mean_group) / (std + epsilon) for rewards [N] in contiguous groups of `group_size`.

    scaling: "group" divides by each group's std (GRPO), "batch" by the std over all N
    (REINFORCE++-style, TRL's scale_rewards="batch"), "none" does not divide (Dr.GRPO; verl's
    norm_adv_by_std_in_grpo=False, TRL's scale_rewards="none").
    ddof: 1 for the unbiased std (verl, TRL, Tunix), 0 for the population std (MaxText, EasyDeL).
    epsilon: 1e-6 as verl's compute_grpo_outcome_advantage (verl/trainer/ppo/core_algos.py,
    `epsilon`); TRL adds 1e-4 (trl/trainer/grpo_trainer.py, `std_rewards + 1e-4`).
    singleton_group, for groups of one sample (group_size 1), where the peers disagree:
      "zero": such a group has no spread and carries no signal, advantage 0 (memjax);
      "verl": verl's compute_grpo_outcome_advantage takes mean 0 and std 1 for it, so the
        advantage is the reward itself (divided by 1 + epsilon under "group" scaling).
      TRL refuses groups of one (GRPOConfig needs num_generations >= 2).
    A group too small for its ddof otherwise (ddof=1) has no std either: its advantage is 0.
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling={scaling!r}; choose from {SCALINGS}")
    if singleton_group not in SINGLETON_GROUPS:
        raise ValueError(f"singleton_group={singleton_group!r}; choose from {SINGLETON_GROUPS}")
    rewards = jnp.asarray(rewards, jnp.float32)
    n = rewards.shape[0]
    if group_size < 1 or n % group_size:
        raise ValueError(f"{n} rewards do not split into groups of {group_size}")
    if group_size == 1 and singleton_group == "verl":
        return _verl_singletons(rewards, scaling, ddof, epsilon)
    grouped = rewards.reshape(n // group_size, group_size)  # [N/G, G]
    centred = grouped - grouped.mean(axis=1, keepdims=True)  # [N/G, G]
    if scaling == "none":
        return centred.reshape(n)
    if scaling == "group":
        if group_size <= ddof:
            return jnp.zeros_like(rewards)
        std = jnp.std(grouped, axis=1, ddof=ddof, keepdims=True)  # [N/G, 1]
    else:
        std = _batch_std(rewards, ddof)
    return (centred / (std + epsilon)).reshape(n)


def _batch_std(rewards: jax.Array, ddof: int) -> jax.Array:
    n = rewards.shape[0]
    return jnp.std(rewards, ddof=ddof) if n > ddof else jnp.float32(1.0)


def _verl_singletons(rewards: jax.Array, scaling: str, ddof: int, epsilon: float) -> jax.Array:
    """Groups of one as verl scores them: mean 0 and std 1, so r / (1 + epsilon). [N]"""
    if scaling == "none":
        return rewards
    std = jnp.float32(1.0) if scaling == "group" else _batch_std(rewards, ddof)
    return rewards / (std + epsilon)


def broadcast_to_contexts(
    trajectory_advantages: jax.Array, context_trajectory: jax.Array
) -> jax.Array:
    """Multi-context GRPO: every context (training row) of a trajectory gets that trajectory's one
    scalar advantage. trajectory_advantages [N]; context_trajectory [B] int (index into N).
    Returns [B]."""
    return jnp.asarray(trajectory_advantages)[jnp.asarray(context_trajectory)]


def token_advantages(row_advantages: jax.Array, loss_mask: jax.Array) -> jax.Array:
    """[B] scalar per row -> [B, T], zero where the mask is off."""
    return row_advantages[:, None] * loss_mask.astype(jnp.float32)


def gae(
    rewards: jax.Array,
    values: jax.Array,
    mask: jax.Array,
    *,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation over the trainable tokens only.

    rewards, values, mask: [B, T]. Masked positions (prompt, tool responses, retrieved passages,
    padding) are not steps of the MDP: the recursion jumps over them, carrying the next value and
    the next advantage back to the previous trainable token (as verl does), so an observation
    between two turns does not discount or bootstrap anything. Rewards on masked positions are
    ignored; put the outcome reward on the last trainable token.
    Returns (advantages [B, T], returns [B, T]), both zero where the mask is off.
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    values = jnp.asarray(values, jnp.float32)
    m = jnp.asarray(mask, jnp.float32)

    def step(carry, xs):
        next_value, next_adv = carry  # [B], [B]
        r, v, mt = xs  # [B] each
        delta = r + gamma * next_value - v
        adv = delta + gamma * lam * next_adv
        next_value = mt * v + (1 - mt) * next_value
        next_adv = mt * adv + (1 - mt) * next_adv
        return (next_value, next_adv), adv * mt

    B = rewards.shape[0]
    zero = jnp.zeros((B,), jnp.float32)
    xs = (rewards.T[::-1], values.T[::-1], m.T[::-1])  # time-major, reversed
    _, adv = jax.lax.scan(step, (zero, zero), xs)
    adv = adv[::-1].T  # [B, T]
    returns = (adv + values) * m
    return adv, returns


def masked_whiten(x: jax.Array, mask: jax.Array, *, shift_mean: bool = True, eps=1e-8):
    """(x - mean) / std over the masked entries (Bessel-corrected variance, as verl and Tunix)."""
    m = jnp.asarray(mask, jnp.float32)
    n = m.sum()
    mean = (x * m).sum() / jnp.maximum(n, 1.0)
    var = (((x - mean) * m) ** 2).sum() / jnp.maximum(n - 1.0, 1.0)
    out = (x - mean) * jax.lax.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * m


__all__ = [
    "SCALINGS",
    "SINGLETON_GROUPS",
    "group_advantages",
    "broadcast_to_contexts",
    "token_advantages",
    "gae",
    "masked_whiten",
]
