"""Reading one `ml_collections` section into a frozen dataclass, with the field's path in errors.

    loss = read_section(PolicyLossConfig, config.rl.loss, "config.rl.loss")

Each dataclass field is read by name; absent fields keep their defaults; a field the dataclass
does not have, a value of the wrong type, or a value its `__post_init__` rejects is a
`ConfigError` that names `<path>.<field>`. This runs once, at the start of a job, so a bad value
fails in the first second instead of after the model has loaded.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from memjax.errors import ConfigError

T = TypeVar("T")


def as_dict(section) -> dict[str, Any]:
    """A ConfigDict, a dict or None as a plain dict."""
    if section is None:
        return {}
    if hasattr(section, "to_dict"):
        return section.to_dict()
    if isinstance(section, dict):
        return dict(section)
    raise ConfigError(f"expected a config section, got {type(section).__name__}")


def _convert(value, annotation, where: str):
    """`value` as the field's declared type (int, float, bool, str, X | None, tuple)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None:
            return None
        return _convert(value, options[0], where) if len(options) == 1 else value
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}={value!r}: expected true or false")
    if annotation in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}={value!r}: expected a number")
        if annotation is int and float(value) != int(value):
            raise ConfigError(f"{where}={value!r}: expected an integer")
        return annotation(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}={value!r}: expected a string")
        return value
    if origin is tuple:
        return tuple(value)
    return value


def read_section(cls: type[T], section, path: str, **fixed) -> T:
    """`cls(**fields of section)`; `fixed` fields are set by the caller, not the config."""
    values = as_dict(section)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(
            f"{path}.{unknown[0]}: no such field; valid: {', '.join(sorted(names - set(fixed)))}"
        )
    kwargs = {k: _convert(v, hints[k], f"{path}.{k}") for k, v in values.items()}
    kwargs.update(fixed)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        message = str(e).removeprefix(f"{cls.__name__}.")
        named = next((k for k in kwargs if message.startswith(f"{k}=")), None)
        raise ConfigError(f"{path}.{message}" if named else f"{path}: {message}") from None


def require(ok: bool, where: str, value, rule: str) -> None:
    """One bounds check: `where=value: rule` as a ConfigError when not ok."""
    if not ok:
        raise ConfigError(f"{where}={value!r}: {rule}")


def pick(section, names: typing.Iterable[str]) -> dict[str, Any]:
    """The named top-level fields of a section that are present (loop fields mixed with others)."""
    values = as_dict(section)
    return {k: values[k] for k in names if k in values}


__all__ = ["as_dict", "read_section", "require", "pick"]
