"""Abstract parameter trees: one description from which init, shardings and loading derive.

A model describes its parameters once, as a pytree (nested dicts) whose leaves are `ArrayInfo`
(shape, dtype, logical axes, initializer). Everything else is a tree map over that description:

    abstract = decoder_abstract(cfg)              # {"embed": ArrayInfo(...), "layers": {...}}
    params = init_params(abstract, key)           # random weights
    shardings = param_shardings(abstract, mesh, rules)
    params = load(...)                            # checkpoints fill the same tree, leaf by leaf
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Initializer = Callable[[jax.Array, tuple[int, ...], Any], jax.Array]


def normal_init(stddev: float = 0.02) -> Initializer:
    return lambda key, shape, dtype: (stddev * jax.random.normal(key, shape, jnp.float32)).astype(
        dtype
    )


def ones_init(key, shape, dtype):
    del key
    return jnp.ones(shape, dtype)


def zeros_init(key, shape, dtype):
    del key
    return jnp.zeros(shape, dtype)


@dataclasses.dataclass(frozen=True)
class ArrayInfo:
    """What a parameter is, before it exists."""

    shape: tuple[int, ...]
    dtype: Any
    logical_axes: tuple[str | None, ...]
    init: Initializer = dataclasses.field(default=normal_init(), compare=False)

    def __post_init__(self):
        if len(self.shape) != len(self.logical_axes):
            raise ValueError(
                f"ArrayInfo shape {self.shape} has {len(self.shape)} dims but logical axes "
                f"{self.logical_axes} name {len(self.logical_axes)}"
            )


def is_info(x) -> bool:
    return isinstance(x, ArrayInfo)


def tree_map_info(fn, abstract, *rest):
    """Maps `fn` over the ArrayInfo leaves of an abstract tree (and matching trees in `rest`)."""
    return jax.tree.map(fn, abstract, *rest, is_leaf=is_info)


def shape_dtype_tree(abstract):
    """The abstract tree as `jax.ShapeDtypeStruct`s (for eval_shape, orbax restore targets)."""
    return tree_map_info(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), abstract)


def init_params(abstract, key: jax.Array):
    """Random parameters for an abstract tree; each leaf gets its own folded key."""
    leaves, treedef = jax.tree.flatten(abstract, is_leaf=is_info)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(treedef, [a.init(k, a.shape, a.dtype) for a, k in zip(leaves, keys)])


def param_count(abstract) -> int:
    return sum(int(np.prod(a.shape)) for a in jax.tree.leaves(abstract, is_leaf=is_info))


def param_bytes(abstract) -> int:
    return sum(
        int(np.prod(a.shape)) * jnp.dtype(a.dtype).itemsize
        for a in jax.tree.leaves(abstract, is_leaf=is_info)
    )


def flatten_with_names(tree, is_leaf=None) -> dict[str, Any]:
    """{'layers/attn/q': leaf, ...}: stable '/'-joined names for messages and checkpoints."""
    flat = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)[0]
    return {"/".join(_key_name(k) for k in path): leaf for path, leaf in flat}


def _key_name(k) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)
