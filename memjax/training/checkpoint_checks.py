"""What a checkpoint step is checked against before it is restored.

Two kinds of finding, handled differently by `Checkpointer.restore`:
  * damage (a missing item folder, an unreadable JSON item, a missing `_METADATA`, an array
    chunk that cannot be read): the step is skipped and the previous one tried;
  * a mismatch with the current run (the saved run description or the saved array tree differs
    from this run's): restoring is refused, naming what differs; an older step of the same run
    would differ in the same way.

A run description ("run spec") is a mapping of the config fields that shape the train state
(model shape or preset, algorithm, optimizer kind, LoRA or not); nested mappings are flattened to
dotted keys, so `{"model": {"num_layers": 2}}` is compared as `model.num_layers`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orbax.checkpoint as ocp

MAX_LISTED = 3  # differences spelled out in one message; the rest are counted


class DamagedStep(Exception):
    """A step directory that cannot be restored; the message says which item and why."""


# ------------------------------------------------------------------------------ run spec


def flatten_spec(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys, values as JSON gives them back (tuples become lists), so a
    saved spec and a fresh one compare equal when their fields are."""
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) or hasattr(value, "items"):
            flat.update(flatten_spec(dict(value.items()), prefix=f"{name}."))
        else:
            flat[name] = json.loads(json.dumps(value))
    return flat


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def spec_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """`saved model.num_layers=2, now 4` for every field both specs hold with different values.
    A field only one side holds is not a difference: specs gain fields as the code grows, and a
    checkpoint written before a field existed must stay resumable."""
    saved, current = flatten_spec(saved), flatten_spec(current)
    return [
        f"saved {key}={_shown(saved[key])}, now {_shown(current[key])}"
        for key in current
        if key in saved and saved[key] != current[key]
    ]


# The config fields that shape a train state, as dotted paths: a run resumed with any of them
# changed would restore arrays of another model, algorithm or optimizer. Paths a config lacks
# are left out. Learning rates, schedules and batch sizes are not here: changing them between
# restarts is a legitimate choice.
RUN_SPEC_FIELDS = (
    "algo",
    "model.source",
    "model.preset",
    "model.vocab_size",
    "model.embed_dim",
    "model.mlp_dim",
    "model.num_layers",
    "model.num_heads",
    "model.num_kv_heads",
    "optimizer.kind",
    "lora",
)


def run_spec_from_config(config, fields: tuple[str, ...] = RUN_SPEC_FIELDS) -> dict[str, Any]:
    """{dotted path: value} of the `fields` a config (ConfigDict or nested dict) holds."""
    spec: dict[str, Any] = {}
    for path in fields:
        node, found = config, True
        for key in path.split("."):
            if hasattr(node, "keys") and key in node:
                node = node[key]
            else:
                found = False
                break
        if found:
            spec[path] = dict(node.items()) if hasattr(node, "items") else node
    return spec


# ------------------------------------------------------------------------------ array tree


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def tree_shapes(tree) -> dict[str, tuple[int, ...]]:
    """{dotted path: shape} of a tree of arrays, `jax.ShapeDtypeStruct`s or orbax metadata, with
    the paths orbax itself uses (attribute and dict keys by name, sequence items by index)."""
    return {
        _dotted(path): tuple(getattr(leaf, "shape", ()))
        for path, leaf in ocp.tree.to_flat_dict(tree).items()
    }


def tree_differences(saved: Mapping[str, tuple], current: Mapping[str, tuple]) -> list[str]:
    """Every path whose shape differs, or that only one side has, in the current tree's order.
    A whole top-level part on one side only (PPO's critic when the checkpoint is GRPO's) is
    one difference, not one per array."""
    found = [
        f"{path} has shape {tuple(saved[path])} saved, {tuple(shape)} now"
        for path, shape in current.items()
        if path in saved and tuple(saved[path]) != tuple(shape)
    ]
    found += _one_side_only(current, saved, "is not in the checkpoint")
    found += _one_side_only(saved, current, "is saved but not in this run")
    return found


def _one_side_only(side: Mapping[str, tuple], other: Mapping[str, tuple], says: str) -> list[str]:
    only = [path for path in side if path not in other]
    other_tops = {path.split(".", 1)[0] for path in other}
    found, grouped = [], set()
    for path in only:
        top = path.split(".", 1)[0]
        if top not in other_tops and "." in path:
            if top not in grouped:
                grouped.add(top)
                count = sum(1 for p in only if p.split(".", 1)[0] == top)
                found.append(f"{top} ({count} arrays) {says}")
        else:
            found.append(f"{path} {says}")
    return found


def summarize(differences: list[str]) -> str:
    shown = "; ".join(differences[:MAX_LISTED])
    rest = len(differences) - MAX_LISTED
    return shown + (f" (and {rest} more)" if rest > 0 else "")


def first_line(error: BaseException, limit: int = 200) -> str:
    """One line of an exception from orbax, grain or tensorstore, whose messages run over many
    lines and embed whole specs; orbax's array-read error carries the real cause (tensorstore's
    NOT_FOUND / DATA_LOSS) as its `__cause__`."""
    lines = str(error).strip().splitlines()
    line = lines[0] if lines else type(error).__name__
    line = line.split(" See full TensorStore details", 1)[0].rstrip(".")
    if error.__cause__ is not None and error.__cause__ is not error:
        line += f" ({first_line(error.__cause__, limit)})"
    return line if len(line) <= limit else line[: limit - 3] + "..."


__all__ = [
    "DamagedStep",
    "flatten_spec",
    "spec_differences",
    "RUN_SPEC_FIELDS",
    "run_spec_from_config",
    "tree_shapes",
    "tree_differences",
    "summarize",
    "first_line",
]
