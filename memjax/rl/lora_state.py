"""LoRA training: what the train state holds, and how the step rebuilds the model from it.

    frozen = base                                          # the loaded decoder, never updated
    adapters = init_params(lora_abstract(cfg), key)        # the policy's TrainState.params
    step = policy_train_step(cfg, loss_cfg, opt, **policy_step_kwargs(cfg, mesh))
    state, metrics = step(state, batch, frozen)
    ref_logp = logprob_fn(frozen, ...)                     # the KL reference: adapters off
    sampler_params = jit_merge_adapters(frozen, state.params, cfg)

The policy trains {"layers": {target: {a, b}}}; the PPO critic trains its adapters and its value
head, {"lora": ..., "head": [D], "bias": []}, over a frozen backbone that is the policy's own base
(same arrays, no copy) when the critic starts from the policy. The frozen trees pass through
`stop_gradient`, so even a caller differentiating the composed tree gets exact zeros for them.
"""

from __future__ import annotations

import jax

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.lora import lora_abstract, with_adapters
from memjax.models.params import init_params
from memjax.parallel import TRAIN_RULES, param_shardings
from memjax.rl.critic import critic_abstract

_HEAD_KEYS = ("head", "bias")


def compose_policy(frozen, adapters) -> dict:
    """The policy the objective runs: frozen base + trainable adapters."""
    return with_adapters(jax.lax.stop_gradient(frozen), adapters)


def critic_trainable_abstract(cfg: DecoderConfig) -> dict:
    """The critic's trainable tree under LoRA: its adapters and the value head."""
    head = {k: v for k, v in critic_abstract(cfg).items() if k in _HEAD_KEYS}
    return {"lora": lora_abstract(cfg), **head}


def critic_frozen_abstract(cfg: DecoderConfig) -> dict:
    return critic_abstract(cfg)["backbone"]


def compose_critic(frozen_backbone, trainable) -> dict:
    """The critic `critic_values` runs: {"backbone": frozen + adapters, "head", "bias"}."""
    backbone = with_adapters(jax.lax.stop_gradient(frozen_backbone), trainable["lora"])
    return {"backbone": backbone, **{k: trainable[k] for k in _HEAD_KEYS}}


def critic_backbone_of(policy_base) -> dict:
    """The policy base as a critic backbone (its output projection left out): the same arrays,
    so policy and critic hold one frozen copy between them."""
    return {k: v for k, v in policy_base.items() if k != "lm_head"}


def init_policy_adapters(cfg: DecoderConfig, key: jax.Array) -> dict:
    return init_params(lora_abstract(cfg), key)


def init_critic_trainable(cfg: DecoderConfig, key: jax.Array) -> dict:
    """Fresh critic adapters (B = 0) and a zero value head, as `critic_from_policy` starts."""
    return init_params(critic_trainable_abstract(cfg), key)


def policy_step_kwargs(cfg: DecoderConfig, mesh=None, rules=TRAIN_RULES) -> dict:
    """`policy_train_step(..., **these)` for a LoRA policy."""
    frozen_sh = param_shardings(decoder_abstract(cfg), mesh, rules) if mesh is not None else None
    return {"compose": compose_policy, "frozen_shardings": frozen_sh}


def critic_step_kwargs(cfg: DecoderConfig, mesh=None, rules=TRAIN_RULES) -> dict:
    """`critic_train_step(..., **these)` for a LoRA critic."""
    frozen_sh = (
        param_shardings(critic_frozen_abstract(cfg), mesh, rules) if mesh is not None else None
    )
    return {"compose": compose_critic, "frozen_shardings": frozen_sh}


__all__ = [
    "compose_policy",
    "compose_critic",
    "critic_trainable_abstract",
    "critic_frozen_abstract",
    "critic_backbone_of",
    "init_policy_adapters",
    "init_critic_trainable",
    "policy_step_kwargs",
    "critic_step_kwargs",
]
