"""The memory layer's typed settings: where banks live, each role's model, the embedder.

    config = MemoryConfig(root="/tmp/memories", manager=RoleSpec("/runs/mr1_grpo_s0_manager"))
    config = MemoryConfig.from_dict({"root": "/tmp/m", "manager": {"source": "scripted"}})

Every role defaults to "scripted" (no model); `from_dict` reads a config section (an
ml_collections ConfigDict's `to_dict()` or plain JSON) and names any unknown field.
"""

from __future__ import annotations

import dataclasses

from memjax.errors import ConfigError
from memjax.memory_layer.roles import RoleSpec
from memjax.memory_layer.shapes import InputLimits


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    root: str = "/tmp/memjax_memories"
    facts: RoleSpec = RoleSpec()
    manager: RoleSpec = RoleSpec()
    answer: RoleSpec = RoleSpec()
    embedder: str = "packaged:minilm"
    embedder_layout: str = ""
    related_k: int = 10  # memories shown to the manager per add
    limits: InputLimits = InputLimits()

    def check_sources(self) -> None:
        """Every role's model exists (validate() checks the values only)."""
        from memjax.memory_layer.roles import check_sources

        for role in ("facts", "manager", "answer"):
            check_sources(getattr(self, role), f"config.memory.{role}")

    def validate(self) -> None:
        if not str(self.root).strip():
            raise ConfigError("config.memory.root: a directory for the users' banks is required")
        for role in ("facts", "manager", "answer"):
            getattr(self, role).validate(f"config.memory.{role}")
        if int(self.related_k) < 1:
            raise ConfigError(f"config.memory.related_k={self.related_k!r}: must be >= 1")
        for f in dataclasses.fields(self.limits):
            if int(getattr(self.limits, f.name)) < 1:
                raise ConfigError(f"config.memory.limits.{f.name}: must be >= 1")

    @classmethod
    def from_dict(cls, d: dict) -> MemoryConfig:
        d = dict(d)
        kwargs = {}
        for role in ("facts", "manager", "answer"):
            if role in d:
                kwargs[role] = _typed(RoleSpec, d.pop(role), f"config.memory.{role}")
        if "limits" in d:
            kwargs["limits"] = _typed(InputLimits, d.pop("limits"), "config.memory.limits")
        config = _typed(cls, d, "config.memory", **kwargs)
        config.validate()
        return config


def _typed(cls, d, field: str, **extra):
    if not isinstance(d, dict):
        raise ConfigError(f"{field}: expected a section of fields, got {type(d).__name__}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ConfigError(f"{field}: unknown field(s) {unknown}; valid: {sorted(names)}")
    values = {}
    for key, value in d.items():
        default = names[key].default
        if isinstance(default, (int, str)) and not isinstance(value, type(default)):
            raise ConfigError(f"{field}.{key}={value!r}: expected {type(default).__name__}")
        values[key] = value
    return cls(**values, **extra)
