"""Which of the policy's parameters train: all of them, or LoRA adapters over a frozen base.

    weights = trained_weights(params, cfg, lora=rc.lora, seed=seed, mesh=mesh)
    weights.policy                    # the Trainable a train step updates
    weights.for_logprobs(trained)     # the policy the log-prob passes run
    weights.for_sampler(trained)      # the policy the sampler decodes with (and export writes)
    weights.reference()               # the frozen policy a KL term scores against

SFT and RL are written once against this choice (RL's critic trains by it too: `memjax.rl.weights`).
A `Trainable` carries what a train step needs to train it: the trained tree's start and
abstract, the step's `compose` / `frozen_shardings`, and the frozen tree the step is bound to.
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
from memjax.training import lora_state


def _trained_as_is(frozen, trainable):
    return trainable


@dataclasses.dataclass
class Trainable:
    """One trained tree: where it starts, its abstract (ArrayInfo tree), and how a train step
    over it rebuilds the model (`compose(frozen, trainable)`; by default it is the model)."""

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


class LoraWeights:
    """Adapters train over a frozen base (`memjax.training.lora_state.FrozenBase`), placed once
    and shared by the policy (adapters on), the reference (adapters off) and RL's critic."""

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
