"""The PPO critic trains by the policy's choice of weights (`memjax.training.trained_weights`):
a whole critic when every weight trains, adapters and a value head over the same frozen base
under LoRA.

    weights = trained_weights(params, cfg, lora=rc.lora, seed=seed, mesh=mesh)
    critic = critic_trainable(weights, critic_params, seed + 1, mesh)
"""

from __future__ import annotations

import jax

from memjax.parallel import TRAIN_RULES
from memjax.rl import critic as critic_lib
from memjax.training.trained_weights import FullWeights, LoraWeights, Trainable


def critic_trainable(
    weights: FullWeights | LoraWeights, critic_params, seed: int, mesh=None, rules=TRAIN_RULES
) -> Trainable:
    """The critic's trained tree. Every weight training: the given critic, or a copy of the
    policy's backbone with a zero head. LoRA: adapters and the value head over a frozen
    backbone, the policy's base (the same arrays) or the given critic's (its head kept)."""
    cfg = weights.cfg
    if isinstance(weights, FullWeights):
        if critic_params is None:
            critic_params = critic_lib.critic_from_policy(weights.policy.initial, cfg)
        return Trainable(critic_params, critic_lib.critic_abstract(cfg))
    trainable = critic_lib.init_critic_trainable(cfg, jax.random.key(seed))
    if critic_params is None:
        frozen = critic_lib.critic_backbone_of(weights.base.params)
    else:
        frozen = critic_params["backbone"]
        trainable.update(head=critic_params["head"], bias=critic_params["bias"])
    kwargs = critic_lib.critic_step_kwargs(cfg, mesh, rules)
    if kwargs["frozen_shardings"] is not None:
        frozen = jax.device_put(frozen, kwargs["frozen_shardings"])
    abstract = critic_lib.critic_trainable_abstract(cfg)
    return Trainable(trainable, abstract, frozen, kwargs, critic_lib.compose_critic)


__all__ = ["critic_trainable"]
