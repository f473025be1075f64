"""memjax.rl: advantages, policy and value losses, rollouts over environments, the RL trainer.

    from memjax.rl import group_advantages, clipped_policy_loss, run_episodes

Names load on first use (importing memjax.rl imports no JAX).
"""

from memjax.lazy_exports import lazy_exports

_EXPORTS = {
    # advantages
    "group_advantages": "memjax.rl.advantages",
    "gae": "memjax.rl.advantages",
    "token_advantages": "memjax.rl.advantages",
    "broadcast_to_contexts": "memjax.rl.advantages",
    "masked_whiten": "memjax.rl.advantages",
    # losses
    "PolicyLossConfig": "memjax.rl.losses",
    "clipped_policy_loss": "memjax.rl.losses",
    "kl_estimate": "memjax.rl.losses",
    "value_loss": "memjax.rl.losses",
    "policy_objective": "memjax.rl.losses",
    # rollouts and environments
    "Environment": "memjax.rl.environment",
    "StepResult": "memjax.rl.environment",
    "Completion": "memjax.rl.rollout",
    "Context": "memjax.rl.rollout",
    "Trajectory": "memjax.rl.rollout",
    "run_episodes": "memjax.rl.rollout",
    "pack": "memjax.rl.rollout",
    # the trainer
    "train": "memjax.rl.trainer",
    "make_generate": "memjax.rl.roles",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
