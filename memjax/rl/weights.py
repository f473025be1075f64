"""RL's side of the weights choice (`memjax.training.trained_weights`): the PPO critic trains
by the same choice as the policy.

    weights = trained_weights(params, cfg, lora=rc.lora, seed=seed, mesh=mesh)
    critic = weights.critic(critic_params, seed + 1)   # a whole critic, or adapters and a head
"""

from __future__ import annotations

import jax

from memjax.models.config import DecoderConfig
from memjax.models.lora_config import LoraConfig
from memjax.parallel import TRAIN_RULES
from memjax.rl import critic as critic_lib
from memjax.training import trained_weights as base
from memjax.training.trained_weights import Trainable


class FullWeights(base.FullWeights):
    def critic(self, critic_params, seed: int, mesh=None, rules=TRAIN_RULES) -> Trainable:
        """A whole critic: the given one, or a copy of the policy's backbone with a zero head."""
        if critic_params is None:
            critic_params = critic_lib.critic_from_policy(self.policy.initial, self.cfg)
        return Trainable(critic_params, critic_lib.critic_abstract(self.cfg))


class LoraWeights(base.LoraWeights):
    def critic(self, critic_params, seed: int, mesh=None, rules=TRAIN_RULES) -> Trainable:
        """Adapters and the value head over a frozen backbone: the policy's base (the same
        arrays), or the given critic's (its head kept)."""
        cfg = self.cfg
        trainable = critic_lib.init_critic_trainable(cfg, jax.random.key(seed))
        if critic_params is None:
            frozen = critic_lib.critic_backbone_of(self.base.params)
        else:
            frozen = critic_params["backbone"]
            trainable.update(head=critic_params["head"], bias=critic_params["bias"])
        kwargs = critic_lib.critic_step_kwargs(cfg, mesh, rules)
        if kwargs["frozen_shardings"] is not None:
            frozen = jax.device_put(frozen, kwargs["frozen_shardings"])
        abstract = critic_lib.critic_trainable_abstract(cfg)
        return Trainable(trainable, abstract, frozen, kwargs, critic_lib.compose_critic)


def trained_weights(
    params,
    cfg: DecoderConfig,
    *,
    lora: LoraConfig | None,
    seed: int,
    source: str = "",
    mesh=None,
    rules=TRAIN_RULES,
) -> FullWeights | LoraWeights:
    """The choice `lora` makes (None: full fine-tuning), with the critic's side."""
    if lora is None:
        return FullWeights(params, cfg)
    return LoraWeights(params, cfg, seed=seed, source=source, mesh=mesh, rules=rules)


__all__ = ["Trainable", "FullWeights", "LoraWeights", "trained_weights"]
