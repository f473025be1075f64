"""The PPO critic: a scalar value head over a decoder backbone, with its own parameters.

    critic = critic_from_policy(policy_params, cfg)       # a copy of the policy's backbone
    critic = critic_from_checkpoint("packaged:smollm2")    # or any decoder checkpoint
    values = critic_values(critic, cfg, tokens, mask)      # [B, T]

Alignment matches `logprobs.sequence_logprobs`: values[:, t] is V of the state *before* token t
(the hidden state at t - 1), the state in which token t was chosen. Position 0 gets 0.
The head starts at zero, so the first values are 0 and the first value loss is the returns'.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.params import ArrayInfo, init_params, zeros_init
from memjax.parallel import constrain


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


__all__ = ["critic_abstract", "critic_from_policy", "critic_from_checkpoint", "critic_values"]
