"""The learners: what GRPO and PPO make of a step's rewards before the roles update.

    learner = learner_for(rc)
    learner.add_targets(batch, rewards, row_traj, values=critic_values_of_batch)

GRPO normalises each trajectory's reward within its group and broadcasts the advantage to
every trainable token of all its contexts (multi-context GRPO). PPO's critic values the
tokens, GAE turns the final-context reward into per-token advantages (whitened over every
host's tokens) and returns, and the critic trains toward those returns.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

from memjax.rl import advantages as adv_lib
from memjax.rl.run_config import AdvantageConfig, RLRunConfig
from memjax.training import host_batches


class GrpoLearner:
    """Group-relative advantages; no critic. Old log-probs come from the trainer's pass or
    the sampler's (`rl.old_logprobs`)."""

    uses_critic = False

    def __init__(self, advantage: AdvantageConfig, group_size: int, old_logprobs: str):
        self.advantage, self.group_size = advantage, group_size
        self.old_from_trainer = old_logprobs == "trainer"

    def add_targets(self, batch: dict, rewards: np.ndarray, row_traj: np.ndarray, values=None):
        """batch["advantages"] [B, T]: each trajectory's group advantage on every trainable
        token of its contexts (0 on padding rows)."""
        a = self.advantage
        traj_adv = adv_lib.group_advantages(
            rewards,
            self.group_size,
            scaling=a.scaling,
            ddof=a.ddof,
            epsilon=a.epsilon,
            singleton_group=a.singleton_group,
        )
        real = row_traj >= 0
        contexts = np.asarray(adv_lib.broadcast_to_contexts(traj_adv, np.maximum(row_traj, 0)))
        row_adv = np.where(real, contexts, 0.0)  # [B]
        loss_mask = batch["loss_mask"]
        batch["advantages"] = np.asarray(
            adv_lib.token_advantages(jnp.asarray(row_adv, jnp.float32), loss_mask)
        )


class PpoLearner:
    """GAE over the critic's values. The ratio's old log-probs are always the trainer's (the
    critic's targets and the policy's must see the same tokens scored the same way)."""

    uses_critic = True
    old_from_trainer = True

    def __init__(self, advantage: AdvantageConfig):
        self.advantage = advantage

    def add_targets(
        self,
        batch: dict,
        rewards: np.ndarray,
        row_traj: np.ndarray,
        values: Callable[[dict], np.ndarray] | None = None,
    ):
        """batch["advantages"], ["old_values"] and ["returns"], [B, T] each. `values(batch)`
        is the critic's [B, T] values of this host's rows."""
        a = self.advantage
        old_values = values(batch)  # [B, T]
        token_rewards = np.zeros_like(old_values)
        last_context = {int(i): r for r, i in enumerate(row_traj) if i >= 0}
        for i, r in last_context.items():  # the trajectory's final context gets the reward
            idx = np.nonzero(batch["loss_mask"][r])[0]
            if len(idx):
                token_rewards[r, idx[-1]] = rewards[i]
        adv, ret = adv_lib.gae(
            token_rewards, old_values, batch["loss_mask"], gamma=a.gamma, lam=a.lam
        )
        if a.whiten:
            adv = host_batches.whiten_global(adv, batch["loss_mask"], adv_lib.masked_whiten)
        batch["advantages"] = np.asarray(adv)
        batch["old_values"] = old_values
        batch["returns"] = np.asarray(ret)


def learner_for(rc: RLRunConfig) -> GrpoLearner | PpoLearner:
    if rc.algo == "ppo":
        return PpoLearner(rc.advantage)
    return GrpoLearner(rc.advantage, rc.group_size, rc.old_logprobs)


__all__ = ["GrpoLearner", "PpoLearner", "learner_for"]
