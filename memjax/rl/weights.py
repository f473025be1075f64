"""Which parameters train: all of them, or LoRA adapters over a frozen base.

    weights = trained_weights(params, cfg, lora=rc.lora, seed=seed, mesh=mesh)
    weights.initial                   # the tree the actor's TrainState starts from
    weights.for_logprobs(trained)     # the policy the log-prob passes run
    weights.for_sampler(trained)      # the policy the sampler decodes with
    weights.reference()               # the KL reference
    critic = weights.critic(critic_params, seed + 1)   # the PPO critic, by the same choice

The roles (`memjax.rl.roles`) are written once against this choice. Each side of the choice
(`Trainable`) carries what a train step needs to train it: the trainable tree's abstract, the
step's `compose` / `frozen_shardings` and the frozen tree the step is bound to.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.frozen import frozen_copy
from memjax.models.lora import lora_abstract
from memjax.models.lora_config import LoraConfig
from memjax.parallel import TRAIN_RULES
from memjax.rl import critic as critic_lib
from memjax.training import lora_state


def _trained_as_is(frozen, trainable):
    return trainable


@dataclasses.dataclass
class Trainable:
    """One trained tree: where it starts, its abstract (ArrayInfo tree), and how a train step
    over it rebuilds the model (`compose(frozen, trainable)`; None: it is the model)."""

    initial: Any
    abstract: dict
    frozen: Any = None  # the frozen tree the step and forward passes are bound to
    step_kwargs: dict = dataclasses.field(default_factory=dict)  # TrainStep's compose, shardings
    compose: Callable[[Any, Any], Any] = _trained_as_is

    def bind(self, step):
        """`step(state, batch)` with the frozen tree bound (a no-op without one)."""
        return step if self.frozen is None else functools.partial(step, frozen=self.frozen)


class FullWeights:
    """Every weight trains."""

    lora_pointer = None  # nothing to point at: checkpoints hold the weights themselves

    def __init__(self, params, cfg: DecoderConfig):
        self.cfg = cfg
        self.policy = Trainable(params, decoder_abstract(cfg))

    def for_logprobs(self, trained):
        return trained

    def for_sampler(self, trained):
        return trained

    def reference(self):
        """The initial weights in the dtypes the forward reads (the same log-probs as the f32
        weights, in half the memory). Taken before the first update donates them."""
        return frozen_copy(self.policy.initial, self.cfg.dtype)

    def critic(self, critic_params, seed: int, mesh=None, rules=TRAIN_RULES) -> Trainable:
        """A whole critic: the given one, or a copy of the policy's backbone with a zero head."""
        if critic_params is None:
            critic_params = critic_lib.critic_from_policy(self.policy.initial, self.cfg)
        return Trainable(critic_params, critic_lib.critic_abstract(self.cfg))


class LoraWeights:
    """Adapters train over a frozen base (`memjax.training.lora_state.FrozenBase`), placed once
    and shared by the actor (adapters on), the reference (adapters off) and the critic."""

    def __init__(self, params, cfg: DecoderConfig, *, seed: int, source: str, mesh, rules):
        self.cfg = cfg
        self.base = lora_state.FrozenBase(params, cfg, source=source, mesh=mesh, rules=rules)
        adapters = lora_state.init_policy_adapters(cfg, jax.random.key(seed))
        self.policy = Trainable(
            adapters, lora_abstract(cfg), self.base.params, self.base.policy_kwargs
        )
        self.lora_pointer = self.base.pointer  # checkpoints point at their base

    def for_logprobs(self, adapters):
        return self.base.policy(adapters)  # the base with the adapters on, nothing copied

    def for_sampler(self, adapters):
        return self.base.merged(adapters)  # W + s A B on the targets

    def reference(self):
        return self.base.params  # adapters off

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
    """The choice `lora` makes (None: full fine-tuning); `cfg` already carries it."""
    if lora is None:
        return FullWeights(params, cfg)
    return LoraWeights(params, cfg, seed=seed, source=source, mesh=mesh, rules=rules)


__all__ = ["Trainable", "FullWeights", "LoraWeights", "trained_weights"]
