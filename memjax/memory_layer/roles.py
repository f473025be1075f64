"""The memory layer's three model roles, each a ChatPolicy built from a source string.

    facts = role_policy(RoleSpec("packaged:smollm2", max_new_tokens=96))
    manager = role_policy(RoleSpec("packaged:smollm2", trained="/runs/grpo/policy"))
    answer = role_policy(RoleSpec("/runs/sft"))          # a training workdir: its policy/
    scripted = role_policy(RoleSpec("scripted"), role="manager")

A role is anything with the ChatPolicy interface (memjax.agents.memory_r1.policy): a batch of
chats in, one completion text per chat out. Sources name how to build one: "scripted" (no
model: memjax.memory_layer.scripted), or a memjax model source ('packaged:smollm2', an HF
directory, a .gguf file, or a training workdir) decoded greedily by memjax's sampler, with
`trained` pointing at trained weights over the source's tokenizer. Other kinds of source
register a builder under their prefix (`register_source("openai", build)` makes
"openai:<model>" build through it): the memory layer only ever calls the policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from memjax.agents.memory_r1.policy import ChatPolicy
from memjax.errors import ConfigError
from memjax.memory_layer.scripted import ScriptedAnswer, ScriptedFacts, ScriptedManager

ROLES = ("facts", "manager", "answer")
SCRIPTED = "scripted"
_SCRIPTED = {"facts": ScriptedFacts, "manager": ScriptedManager, "answer": ScriptedAnswer}
# The output budgets of configs/memory_r1_synthetic_cpu.py: a model that loops stops here.
DEFAULT_MAX_NEW_TOKENS = {"facts": 96, "manager": 256, "answer": 64}


@dataclasses.dataclass(frozen=True)
class RoleSpec:
    """Where one role's model comes from."""

    source: str = SCRIPTED
    trained: str = ""  # HF directory of trained weights over `source`'s tokenizer
    max_new_tokens: int = 0  # 0: the role's default (DEFAULT_MAX_NEW_TOKENS)
    param_dtype: str = "float32"
    batch_size: int = 16
    max_prompt_tokens: int = 4096  # longer prompts keep their last tokens

    def validate(self, field: str) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise ConfigError(
                f"{field}.source: a model source or {SCRIPTED!r}, got {self.source!r}"
            )
        for name in ("batch_size", "max_prompt_tokens"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{field}.{name}={getattr(self, name)!r}: must be >= 1")
        if int(self.max_new_tokens) < 0:
            raise ConfigError(f"{field}.max_new_tokens={self.max_new_tokens!r}: must be >= 0")


SourceBuilder = Callable[[RoleSpec, str], ChatPolicy]
_BUILDERS: dict[str, SourceBuilder] = {}


def register_source(prefix: str, build: SourceBuilder) -> None:
    """Sources written "<prefix>:..." build their policy with `build(spec, role)`."""
    _BUILDERS[prefix] = build


def check_sources(spec: RoleSpec, field: str) -> None:
    """The spec's source (and trained weights) exist: a ConfigError naming the field if not,
    before anything loads."""
    from memjax.checkpoints import packaged
    from memjax.errors import CheckpointError

    spec.validate(field)
    if spec.source == SCRIPTED or spec.source.split(":", 1)[0] in _BUILDERS:
        return
    try:
        packaged.resolve(spec.source)
    except CheckpointError as e:  # unknown packaged name, or no such path
        raise ConfigError(f"{field}.source={spec.source!r}: {e}") from None
    if spec.trained and not Path(spec.trained).expanduser().is_dir():
        raise ConfigError(f"{field}.trained={spec.trained!r}: no such directory")


def role_policy(spec: RoleSpec, role: str) -> ChatPolicy:
    """The ChatPolicy a spec names, for one of ROLES."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}; valid: {', '.join(ROLES)}")
    check_sources(spec, f"config.memory.{role}")
    if spec.source == SCRIPTED:
        return _SCRIPTED[role]()
    prefix = spec.source.split(":", 1)[0]
    if prefix in _BUILDERS:
        return _BUILDERS[prefix](spec, role)
    return _model_policy(spec, role)


def _model_policy(spec: RoleSpec, role: str) -> ChatPolicy:
    """Greedy decoding with memjax's sampler, as the held-out evaluations run the agents."""
    from memjax.agents.memory_r1.models import load_agent_model, sampler_policy
    from memjax.agents.memory_r1.run_settings import ModelSpec

    model = load_agent_model(
        ModelSpec(source=spec.source, trained=spec.trained, param_dtype=spec.param_dtype)
    )
    budget = int(spec.max_new_tokens) or DEFAULT_MAX_NEW_TOKENS[role]
    sampling = {"greedy": True, "temperature": 1.0, "max_new_tokens": budget}
    return sampler_policy(
        model,
        sampling,
        batch_size=int(spec.batch_size),
        max_prompt_tokens=int(spec.max_prompt_tokens),
    )
