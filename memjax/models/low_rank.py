"""The low-rank update a decoder layer adds where it carries adapters (`memjax.models.lora`).

The forward pass needs only this: where the adapters ride in a layer's dict (`ADAPTERS_KEY`)
and how a projection adds s (x A) B. Building, initialising and merging adapters lives in
`memjax.models.lora`, which builds on the decoder's parameter layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

ADAPTERS_KEY = "lora"  # a layer's adapters: layers/lora/<target>/{a, b}


def low_rank_update(x: jax.Array, pair: dict, dt, scale: float) -> jax.Array:
    """s (x A) B for x [M, Din] and one layer's pair (a [*in, r], b [r, *out]) -> [M, Dout].

    Two thin GEMMs through the rank: never the [Din, Dout] product. The scale multiplies the
    [M, r] intermediate, the smallest array on the way."""
    a, b = pair["a"], pair["b"]
    r = a.shape[-1]
    h = x @ a.astype(dt).reshape(x.shape[-1], r)  # [M, r]
    return (h * jnp.asarray(scale, dt)) @ b.astype(dt).reshape(r, -1)  # [M, Dout]


__all__ = ["ADAPTERS_KEY", "low_rank_update"]
