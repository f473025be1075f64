"""The token-embedding lookup, with a gradient that stays sharded like the table.

    x = embedding.lookup(params["embed"], tokens, mesh, rules)   # [B, T, D], table's dtype

The table [V, D] is stored vocab-on-tensor, embed-on-fsdp. The lookup gathers its fsdp shards
first (as FSDP does for every weight: a lookup into an embed-sharded table yields embed-sharded
rows, which the partitioner cannot move onto the batch-sharded activations without fully
rematerialising them).

Differentiated as written, that gather's transpose constrains the cotangent to the gathered
layout: every device scatter-adds its rows into a whole [V/t, D] f32 gradient, which is then
all-reduced over the batch shards and sliced. For Qwen2.5-3B that is a 1.19 GiB all-reduce and
one or two 1.19 GiB f32 buffers per chip in every micro-batch (the TPU compile of
MemSearcher 3B on v5p:2x2x2 held two). Here the backward pass scatter-adds into a gradient laid
out like the table itself: the partitioner moves the small [B, T, D] cotangent with an
all-to-all to embed-sharded rows and each device writes only its [V/t, D/fsdp] block, so the
gradient is never whole on any device. The values are the same as the plain gather's gradient.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from memjax.parallel import constrain

TABLE_AXES = ("vocab", "embed")  # as decoder_abstract stores the table
ROW_AXES = ("batch", "seq", None)  # the looked-up rows, as the layers take them


def lookup(table: jax.Array, tokens: jax.Array, mesh=None, rules=None) -> jax.Array:
    """table [V, D], tokens [B, T] int -> rows [B, T, D] in the table's dtype."""
    if mesh is None:
        return table[tokens]
    return _sharded_lookup(table, tokens, mesh, rules)


def _gathered_lookup(table, tokens, mesh, rules):
    gathered = constrain(table, ("vocab", None), mesh, rules)  # fsdp shards gathered
    return constrain(gathered[tokens], ROW_AXES, mesh, rules)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _sharded_lookup(table, tokens, mesh, rules):
    return _gathered_lookup(table, tokens, mesh, rules)


def _forward(table, tokens, mesh, rules):
    # The table is a parameter, alive anyway: keeping it costs nothing and gives the
    # gradient its shape and dtype.
    return _gathered_lookup(table, tokens, mesh, rules), (table, tokens)


def _backward(mesh, rules, residuals, rows_cotangent):
    table, tokens = residuals
    rows_cotangent = constrain(rows_cotangent, ROW_AXES, mesh, rules)  # [B, T, D]
    grad = constrain(jnp.zeros(table.shape, jnp.float32), TABLE_AXES, mesh, rules)  # [V, D]
    grad = grad.at[tokens].add(rows_cotangent.astype(jnp.float32))
    grad = constrain(grad, TABLE_AXES, mesh, rules)
    return grad.astype(table.dtype), None


_sharded_lookup.defvjp(_forward, _backward)

__all__ = ["lookup"]
