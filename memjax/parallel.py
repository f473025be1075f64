"""Meshes and sharding as data: a mesh from config, logical-axis rules, NamedShardings.

Every parameter and activation names its dimensions with logical axes (`batch`, `seq`, `embed`,
`heads`, `kv_heads`, `head_dim`, `mlp`, `vocab`, `layers`, ...). A rules table, which lives in the
config and may differ per role (training vs. sampling), maps each logical axis to zero, one or
several mesh axes (`data`, `fsdp`, `tensor`). Two dimensions of one array mapped onto the same
mesh axis is an error, caught when the spec is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# Logical axis -> mesh axes. Training shards weights over fsdp and tensor; the batch over
# data and fsdp (fsdp is data parallelism whose weights are gathered per layer).
TRAIN_RULES = {
    "batch": ("data", "fsdp"),
    "seq": (),
    "embed": ("fsdp",),
    "heads": ("tensor",),
    "kv_heads": ("tensor",),
    "head_dim": (),
    "mlp": ("tensor",),
    "vocab": ("tensor",),
    "layers": (),
    "norm": (),
    "cache_seq": (),
}

# Sampling keeps weights tensor-parallel only (no per-step all-gathers of fsdp shards in decode).
SAMPLING_RULES = {**TRAIN_RULES, "embed": ()}


class ShardingError(ValueError):
    pass


class Rules(Mapping):
    """A frozen, hashable logical-axis -> mesh-axes table (so it can be a static jit argument)."""

    def __init__(self, table: Mapping[str, tuple[str, ...]]):
        self._items = tuple(sorted(table.items()))
        self._table = dict(self._items)

    def __getitem__(self, name):
        return self._table[name]

    def __iter__(self):
        return iter(self._table)

    def __len__(self):
        return len(self._table)

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        return isinstance(other, Rules) and self._items == other._items

    def __repr__(self):
        return f"Rules({self._table})"


def normalize_rules(rules: Mapping[str, str | Sequence[str] | None]) -> Rules:
    """Accepts rules written as strings, lists or None (config files) and returns a `Rules`."""
    if isinstance(rules, Rules):
        return rules
    out = {}
    for name, axes in dict(rules).items():
        if axes is None:
            axes = ()
        elif isinstance(axes, str):
            axes = (axes,)
        out[name] = tuple(axes)
        for a in out[name]:
            if a not in MESH_AXES:
                raise ShardingError(
                    f"sharding rule {name!r} -> {a!r}: unknown mesh axis; choose from {MESH_AXES}"
                )
    return Rules(out)


def make_mesh(shape: Mapping[str, int], devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A mesh with axes (data, fsdp, tensor); one axis may be -1, meaning 'the rest'."""
    devices = list(devices if devices is not None else jax.devices())
    unknown = set(shape) - set(MESH_AXES)
    if unknown:
        raise ShardingError(f"mesh axes {sorted(unknown)} are unknown; choose from {MESH_AXES}")
    sizes = [int(shape.get(a, 1)) for a in MESH_AXES]
    if sizes.count(-1) > 1:
        raise ShardingError(f"mesh {dict(shape)}: at most one axis may be -1")
    known = int(np.prod([s for s in sizes if s != -1]))
    if -1 in sizes:
        if len(devices) % known:
            raise ShardingError(
                f"mesh {dict(shape)}: {len(devices)} devices do not divide by {known}"
            )
        sizes[sizes.index(-1)] = len(devices) // known
    if int(np.prod(sizes)) != len(devices):
        raise ShardingError(
            f"mesh {dict(zip(MESH_AXES, sizes))} needs {int(np.prod(sizes))} devices, "
            f"but {len(devices)} are available"
        )
    return Mesh(np.asarray(devices).reshape(sizes), MESH_AXES)


def logical_to_spec(
    logical_axes: Sequence[str | None],
    rules: Mapping[str, tuple[str, ...]],
    shape: Sequence[int] | None = None,
    mesh: Mesh | None = None,
) -> PartitionSpec:
    """PartitionSpec for one array. With `shape` and `mesh`, mesh axes that do not divide a
    dimension are dropped (that dimension is replicated over them) instead of failing."""
    used: dict[str, str] = {}
    spec = []
    for i, name in enumerate(logical_axes):
        if name is None:
            spec.append(None)
            continue
        if name not in rules:
            raise ShardingError(
                f"logical axis {name!r} has no sharding rule; rules: {sorted(rules)}"
            )
        axes = []
        size = 1
        for mesh_axis in rules[name]:
            if mesh_axis in used:
                raise ShardingError(
                    f"logical axes {used[mesh_axis]!r} and {name!r} of {tuple(logical_axes)} both "
                    f"map to mesh axis {mesh_axis!r}"
                )
            if mesh is not None and shape is not None:
                n = mesh.shape[mesh_axis]
                if shape[i] % (size * n):
                    continue
                size *= n
            used[mesh_axis] = name
            axes.append(mesh_axis)
        spec.append(tuple(axes) if len(axes) > 1 else (axes[0] if axes else None))
    return PartitionSpec(*spec)


def named_sharding(mesh: Mesh, rules, logical_axes, shape=None) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(logical_axes, normalize_rules(rules), shape, mesh))


def param_shardings(abstract, mesh: Mesh, rules):
    """NamedSharding for every leaf of an abstract parameter tree (`memjax.models.params.ArrayInfo`
    leaves: anything with a shape and logical axes, so that this module, below the models, does
    not import them)."""
    rules = normalize_rules(rules)
    return jax.tree.map(
        lambda a: named_sharding(mesh, rules, a.logical_axes, a.shape),
        abstract,
        is_leaf=lambda x: hasattr(x, "logical_axes"),
    )


def shard_params(params, abstract, mesh: Mesh, rules):
    return jax.device_put(params, param_shardings(abstract, mesh, rules))


def constrain(
    x: jax.Array, logical_axes: Sequence[str | None], mesh: Mesh | None, rules
) -> jax.Array:
    """Sharding constraint on an activation; a no-op when no mesh is given (single device)."""
    if mesh is None:
        return x
    spec = logical_to_spec(logical_axes, normalize_rules(rules), x.shape, mesh)
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


__all__ = [
    "MESH_AXES",
    "TRAIN_RULES",
    "SAMPLING_RULES",
    "Rules",
    "ShardingError",
    "make_mesh",
    "normalize_rules",
    "logical_to_spec",
    "named_sharding",
    "param_shardings",
    "shard_params",
    "constrain",
]
