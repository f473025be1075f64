"""LoRA training: what the train state holds, and how the step rebuilds the model from it.

    frozen = base                                          # the loaded decoder, never updated
    adapters = init_params(lora_abstract(cfg), key)        # the policy's TrainState.params
    step = policy_train_step(cfg, loss_cfg, opt, **policy_step_kwargs(cfg, mesh))  # memjax.rl.steps
    state, metrics = step(state, batch, frozen)
    ref_logp = logprob_fn(frozen, ...)                     # the KL reference: adapters off
    sampler_params = jit_merge_adapters(frozen, state.params, cfg)

The policy trains {"layers": {target: {a, b}}} (a LoRA PPO critic: `memjax.rl.critic`). The
frozen tree passes through `stop_gradient`, so even a caller differentiating the composed tree
gets exact zeros for it.
"""

from __future__ import annotations

import functools
import hashlib

import jax
import numpy as np

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.lora import jit_merge_adapters, lora_abstract, with_adapters
from memjax.models.params import flatten_with_names, init_params
from memjax.parallel import TRAIN_RULES, param_shardings


def compose_policy(frozen, adapters) -> dict:
    """The policy the objective runs: frozen base + trainable adapters."""
    return with_adapters(jax.lax.stop_gradient(frozen), adapters)


def init_policy_adapters(cfg: DecoderConfig, key: jax.Array) -> dict:
    return init_params(lora_abstract(cfg), key)


def policy_step_kwargs(cfg: DecoderConfig, mesh=None, rules=TRAIN_RULES) -> dict:
    """`policy_train_step(..., **these)` for a LoRA policy."""
    frozen_sh = param_shardings(decoder_abstract(cfg), mesh, rules) if mesh is not None else None
    return {"compose": compose_policy, "frozen_shardings": frozen_sh}


# ------------------------------------------------------------------------------ a run's frozen base


class FrozenBase:
    """A LoRA run's frozen base: placed once on the mesh (train layout), shared by the policy
    (adapters on), the KL reference (adapters off) and the PPO critic's backbone
    (`memjax.rl.critic.critic_backbone_of`), and described by
    a pointer that the run's checkpoints carry (in their run spec) instead of the weights."""

    def __init__(
        self, params, cfg: DecoderConfig, *, source: str = "", mesh=None, rules=TRAIN_RULES
    ):
        self.cfg = cfg
        self.policy_kwargs = policy_step_kwargs(cfg, mesh, rules)
        shardings = self.policy_kwargs["frozen_shardings"]
        self.params = jax.device_put(params, shardings) if shardings is not None else params
        self.pointer = base_pointer(self.params, cfg, source)

    def bind(self, step, frozen=None):
        """A LoRA train step called as `step(state, batch)`, the frozen tree bound."""
        return functools.partial(step, frozen=self.params if frozen is None else frozen)

    def policy(self, adapters) -> dict:
        """The tree log-probs run on: the base with the adapters on (nothing copied)."""
        return with_adapters(self.params, adapters)

    def merged(self, adapters) -> dict:
        """The sampler's copy: W + s A B on the targets (the base's own arrays elsewhere)."""
        return jit_merge_adapters(self.params, adapters, self.cfg)


FINGERPRINT_VALUES = 64  # leading values of each weight that the fingerprint hashes


def base_fingerprint(params) -> str:
    """A hash of every weight's name, shape, dtype and first values: exact whatever the mesh or
    the number of devices (no reduction), and it differs between any two real bases."""
    digest = hashlib.sha256()
    for name, x in flatten_with_names(params).items():
        head = np.asarray(jax.device_get(x.reshape(-1)[:FINGERPRINT_VALUES]))
        digest.update(f"{name}{tuple(x.shape)}{head.dtype}".encode())
        digest.update(head.tobytes())
    return digest.hexdigest()[:16]


def base_pointer(params, cfg: DecoderConfig, source: str = "") -> dict:
    """What a LoRA checkpoint records instead of its base: the adapters' settings, where the
    base came from, and its fingerprint (so a resume onto another base is refused)."""
    lora = cfg.lora
    return {
        "rank": lora.rank,
        "alpha": lora.alpha,
        "targets": list(lora.targets),
        "dtype": lora.dtype,
        "base_source": source,
        "base_fingerprint": base_fingerprint(params),
    }


__all__ = [
    "FrozenBase",
    "base_pointer",
    "base_fingerprint",
    "compose_policy",
    "init_policy_adapters",
    "policy_step_kwargs",
]
