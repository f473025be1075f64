"""A frozen copy of a decoder's weights for forward passes only (the KL reference model).

    ref = frozen_copy(params, cfg.dtype)      # same tree; matrices in the compute dtype

The forward reads every weight but the norm scales in the compute dtype (projections,
embedding rows, the unembedding and biases are cast before use; `decoder._project`,
`logits_from_hidden`), so a copy that stores them that way computes the same log-probs as the
f32 master weights would, in half the memory. Norm scales are read in f32 and stay as stored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memjax.models.params import flatten_with_names, is_info


def keeps_stored_dtype(name: str) -> bool:
    """Leaves the forward reads in f32 (RMSNorm scales: 'layers/attn_norm', 'final_norm')."""
    return "norm" in name.rsplit("/", 1)[-1]


def frozen_dtype(name: str, stored, compute_dtype):
    """The dtype `frozen_copy` holds leaf `name` in: the narrower of stored and compute."""
    if keeps_stored_dtype(name):
        return jnp.dtype(stored)
    stored, compute = jnp.dtype(stored), jnp.dtype(compute_dtype)
    return compute if compute.itemsize < stored.itemsize else stored


def frozen_copy(params, compute_dtype):
    """A copy of `params` (new buffers, same shardings) with every leaf but the norm scales
    in the compute dtype when that is narrower."""
    flat = flatten_with_names(params)
    leaves = [jnp.array(x, dtype=frozen_dtype(n, x.dtype, compute_dtype)) for n, x in flat.items()]
    return jax.tree.unflatten(jax.tree.structure(params), leaves)


def frozen_bytes(abstract, leaf_bytes: list[int], compute_dtype) -> int:
    """Bytes of `frozen_copy` of an ArrayInfo tree, from each leaf's bytes as stored (in
    `jax.tree.leaves` order, e.g. per device after sharding)."""
    names = flatten_with_names(abstract, is_leaf=is_info)
    total = 0
    for (name, a), n in zip(names.items(), leaf_bytes, strict=True):
        held = frozen_dtype(name, a.dtype, compute_dtype)
        total += n * held.itemsize // jnp.dtype(a.dtype).itemsize
    return total


__all__ = ["frozen_bytes", "frozen_copy", "frozen_dtype", "keeps_stored_dtype"]
