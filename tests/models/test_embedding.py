"""The embedding lookup on an 8-device mesh: the same rows and gradient as a plain gather, and a
gradient that is never whole on a device (no all-reduce of the [V/t, D] table shard)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from memjax.aot import analysis
from memjax.models import embedding
from memjax.parallel import TRAIN_RULES, make_mesh, normalize_rules

V, D, B, T = 512, 64, 8, 16
RULES = normalize_rules(TRAIN_RULES)


@pytest.fixture(scope="module")
def setup():
    mesh = make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    table = jax.device_put(
        jax.random.normal(jax.random.key(0), (V, D)), NamedSharding(mesh, P("tensor", "fsdp"))
    )
    # Repeated tokens: their cotangents must add up in one row of the gradient.
    tokens = jax.random.randint(jax.random.key(1), (B, T), 0, V // 8)
    tokens = jax.device_put(tokens, NamedSharding(mesh, P("fsdp", None)))
    weights = jax.random.normal(jax.random.key(2), (B, T, D))
    return mesh, table, tokens, weights


def _loss(lookup, tokens, weights):
    return lambda table: jnp.sum(jnp.sin(lookup(table, tokens)) * weights)


def test_rows_and_gradient_equal_a_plain_gather(setup):
    mesh, table, tokens, weights = setup
    sharded = lambda t, tok: embedding.lookup(t, tok, mesh, RULES)
    plain = lambda t, tok: t[tok]
    np.testing.assert_array_equal(
        np.asarray(jax.jit(sharded)(table, tokens)), np.asarray(table)[np.asarray(tokens)]
    )
    got = jax.jit(jax.grad(_loss(sharded, tokens, weights)))(table)
    want = jax.grad(_loss(plain, np.asarray(tokens), weights))(np.asarray(table))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert got.sharding.spec == P("tensor", "fsdp")


def _collective_shapes(compiled_text: str) -> list[str]:
    found = analysis.collectives(compiled_text)
    return [c["shape"] for c in found if c["op"] in ("all-reduce", "reduce-scatter")]


def test_the_gradient_is_not_all_reduced_whole(setup):
    mesh, table, tokens, weights = setup
    shard = NamedSharding(mesh, P("tensor", "fsdp"))
    table_shard = f"f32[{V // 2},{D}]"  # vocab split over tensor, embed gathered

    def compiled(lookup):
        fn = jax.jit(jax.grad(_loss(lookup, tokens, weights)), out_shardings=shard)
        return fn.lower(table).compile().as_text()

    gathered = lambda t, tok: embedding._gathered_lookup(t, tok, mesh, RULES)
    # Differentiated as written, the gathered table's gradient is all-reduced whole ...
    assert table_shard in _collective_shapes(compiled(gathered))
    # ... the lookup's own backward pass never builds it.
    sharded = lambda t, tok: embedding.lookup(t, tok, mesh, RULES)
    assert table_shard not in _collective_shapes(compiled(sharded))


def test_without_a_mesh_it_is_a_gather():
    table = jnp.arange(12.0).reshape(6, 2)
    tokens = jnp.array([[5, 0, 5]])
    np.testing.assert_array_equal(embedding.lookup(table, tokens), table[tokens])
