"""The PPO critic: a scalar value head over a decoder backbone, with its own parameters.

    critic = critic_from_policy(policy_params, cfg)       # a copy of the policy's backbone
    critic = critic_from_checkpoint("packaged:smollm2")    # or any decoder checkpoint
    values = critic_values(critic, cfg, tokens, mask)      # [B, T]

Alignment matches `memjax.training.logprobs.sequence_logprobs`: values[:, t] is V of the state
*before* token t (the hidden state at t - 1), the state in which token t was chosen. Position 0 gets 0.
The head starts at zero, so the first values are 0 and the first value loss is the returns'.

Under LoRA the critic trains its adapters and its value head, {"lora": ..., "head": [D],
"bias": []}, over a frozen backbone that is the policy's own base (same arrays, no copy) when
the critic starts from the policy; the frozen tree passes through `stop_gradient`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.lora import lora_abstract, with_adapters
from memjax.models.params import ArrayInfo, init_params, zeros_init
from memjax.parallel import TRAIN_RULES, constrain, param_shardings


def critic_abstract(cfg: DecoderConfig) -> dict:
    """The backbone (decoder without its output projection) plus a [D] head and a bias."""
    backbone = dict(decoder.decoder_abstract(cfg))
    backbone.pop("lm_head", None)
    return {
        "backbone": backbone,
        "head": ArrayInfo((cfg.embed_dim,), jnp.float32, ("embed",), zeros_init),
        "bias": ArrayInfo((), jnp.float32, (), zeros_init),
    }


def critic_from_policy(policy_params, cfg: DecoderConfig) -> dict:
    """A critic whose backbone is a copy (not an alias) of the policy's."""
    backbone = {k: v for k, v in policy_params.items() if k != "lm_head"}
    backbone = jax.tree.map(jnp.copy, backbone)
    head = {
        k: v
        for k, v in init_params(critic_abstract(cfg), jax.random.key(0)).items()
        if k != "backbone"
    }
    return {"backbone": backbone, **head}


def critic_from_checkpoint(source: str, **overrides) -> tuple[dict, DecoderConfig]:
    """A critic initialised from a decoder checkpoint ('packaged:smollm2', HF dir, .gguf)."""
    from memjax.checkpoints import load_model

    model = load_model(source, with_tokenizer=False, **overrides)
    return critic_from_policy(model.params, model.cfg), model.cfg


def critic_values(
    params, cfg: DecoderConfig, tokens, token_mask, *, mesh=None, rules=None
) -> jax.Array:
    """Values [B, T] (f32), aligned with the tokens they precede."""
    positions = decoder.positions_from_mask(token_mask)
    hidden, _ = decoder.forward_hidden(
        params["backbone"], tokens, positions, cfg, token_mask=token_mask, mesh=mesh, rules=rules
    )  # [B, T, D]
    hidden = constrain(hidden, ("batch", "seq", None), mesh, rules)
    v = jnp.einsum("btd,d->bt", hidden.astype(jnp.float32), params["head"]) + params["bias"]
    return jnp.pad(v[:, :-1], ((0, 0), (1, 0)))


# ------------------------------------------------------------------------------ LoRA

_HEAD_KEYS = ("head", "bias")


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


def init_critic_trainable(cfg: DecoderConfig, key: jax.Array) -> dict:
    """Fresh critic adapters (B = 0) and a zero value head, as `critic_from_policy` starts."""
    return init_params(critic_trainable_abstract(cfg), key)


def critic_step_kwargs(cfg: DecoderConfig, mesh=None, rules=TRAIN_RULES) -> dict:
    """`critic_train_step(..., **these)` for a LoRA critic."""
    frozen_sh = (
        param_shardings(critic_frozen_abstract(cfg), mesh, rules) if mesh is not None else None
    )
    return {"compose": compose_critic, "frozen_shardings": frozen_sh}


__all__ = [
    "critic_abstract",
    "critic_from_policy",
    "critic_from_checkpoint",
    "critic_values",
    "critic_trainable_abstract",
    "critic_frozen_abstract",
    "compose_critic",
    "critic_backbone_of",
    "init_critic_trainable",
    "critic_step_kwargs",
]
