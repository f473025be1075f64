"""LoraConfig: which projections of the decoder carry low-rank adapters, their rank and alpha."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from memjax.errors import ConfigError

LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


@dataclasses.dataclass(frozen=True)
class LoraConfig:
    """delta W = (alpha / rank) A B on each target projection (LoRA, Hu et al. 2021; the scale
    and the initialisation follow PEFT's defaults: A Kaiming-uniform, B zero, no rsLoRA).

    `dtype` is the adapters' own (and their optimizer state's); the frozen base may be held in a
    lower one (DecoderConfig.param_dtype) since it never receives an update.
    """

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = LORA_TARGETS
    dtype: str = "float32"

    def __post_init__(self):
        if isinstance(self.targets, str):  # "q,v" from a command line
            object.__setattr__(self, "targets", tuple(t for t in self.targets.split(",") if t))
        object.__setattr__(self, "targets", tuple(self.targets))
        if int(self.rank) < 1:
            raise ValueError(f"lora.rank={self.rank} must be >= 1 (0 in a recipe means no LoRA)")
        if not float(self.alpha) > 0:
            raise ValueError(f"lora.alpha={self.alpha} must be positive")
        unknown = [t for t in self.targets if t not in LORA_TARGETS]
        if unknown or not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(
                f"lora.targets={self.targets!r}: name each of {LORA_TARGETS} at most once "
                f"(at least one){'; unknown ' + repr(unknown) if unknown else ''}"
            )
        if self.dtype not in _DTYPES:
            raise ValueError(f"lora.dtype={self.dtype!r}; choose from {list(_DTYPES)}")

    @property
    def scale(self) -> float:
        return float(self.alpha) / int(self.rank)

    @property
    def weight_dtype(self):
        return _DTYPES[self.dtype]


def lora_config_from(section) -> LoraConfig | None:
    """A recipe's `lora` section (rank, alpha, targets, dtype) -> LoraConfig; rank 0 (or no
    section) is full fine-tuning. One field switches it on: `--config.lora.rank=16`."""
    if section is None:
        return None
    get = section.get if hasattr(section, "get") else lambda k, d=None: getattr(section, k, d)
    rank = int(get("rank", 0) or 0)
    if rank == 0:
        return None
    kwargs = {"rank": rank}
    for field in ("alpha", "targets", "dtype"):
        value = get(field, None)
        if value is not None:
            kwargs[field] = value
    return LoraConfig(**kwargs)


LORA_FIELDS = ("rank", "alpha", "targets", "dtype")


def lora_from_section(section, path: str) -> LoraConfig | None:
    """A trainer's `lora` sub-section (strict: an unknown field is an error) -> LoraConfig or
    None, with `<path>.lora.<field>` in every message."""
    values = section.to_dict() if hasattr(section, "to_dict") else dict(section or {})
    unknown = sorted(set(values) - set(LORA_FIELDS))
    if unknown:
        valid = ", ".join(sorted(LORA_FIELDS))
        raise ConfigError(f"{path}.lora.{unknown[0]}: no such field; valid: {valid}")
    try:
        return lora_config_from(values or None)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path}.{e}") from None


__all__ = ["LORA_TARGETS", "LORA_FIELDS", "LoraConfig", "lora_config_from", "lora_from_section"]
