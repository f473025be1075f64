"""Meshes, rules and sharded forward on 8 fake CPU devices (data=2, fsdp=2, tensor=2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from memjax.checkpoints.decoder_io import load_hf_decoder
from memjax.models import decoder
from memjax.parallel import (
    SAMPLING_RULES,
    TRAIN_RULES,
    ShardingError,
    logical_to_spec,
    make_mesh,
    normalize_rules,
)
from tests.models.hf_fixtures import make_hf_model, padded_batch

MESH = {"data": 2, "fsdp": 2, "tensor": 2}


def test_mesh_from_config_with_rest_axis():
    mesh = make_mesh({"data": -1, "tensor": 2})
    assert dict(mesh.shape) == {"data": 4, "fsdp": 1, "tensor": 2}
    with pytest.raises(ShardingError, match="needs 16 devices"):
        make_mesh({"data": 4, "fsdp": 2, "tensor": 2})
    with pytest.raises(ShardingError, match="at most one axis"):
        make_mesh({"data": -1, "fsdp": -1})
    with pytest.raises(ShardingError, match="unknown"):
        make_mesh({"model": 8})


def test_rules_collisions_and_unknown_axes_are_errors():
    rules = normalize_rules({**TRAIN_RULES, "mlp": ["fsdp"]})
    with pytest.raises(ShardingError, match="'embed' and 'mlp'.*'fsdp'"):
        logical_to_spec(("embed", "mlp"), rules)
    with pytest.raises(ShardingError, match="no sharding rule"):
        logical_to_spec(("nonsense",), rules)
    with pytest.raises(ShardingError, match="unknown mesh axis"):
        normalize_rules({"embed": "model"})
    assert hash(normalize_rules(TRAIN_RULES)) == hash(normalize_rules(dict(TRAIN_RULES)))


def test_indivisible_dimension_is_replicated_not_an_error():
    mesh = make_mesh(MESH)
    # 3 kv heads cannot split over tensor=2: replicated on that axis.
    spec = logical_to_spec(
        ("embed", "kv_heads", "head_dim"), normalize_rules(TRAIN_RULES), (64, 3, 16), mesh
    )
    assert spec == P("fsdp", None, None)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_qwen")
    make_hf_model("qwen2_untied").save_pretrained(path)
    return path


def test_params_are_placed_as_the_rules_say(tiny_checkpoint):
    mesh = make_mesh(MESH)
    params, cfg = load_hf_decoder(tiny_checkpoint, mesh=mesh, rules=TRAIN_RULES)
    layers = params["layers"]
    assert layers["q"].sharding.spec == P(None, "fsdp", "tensor", None)  # [L, D, N, Hd]
    assert layers["o"].sharding.spec == P(None, "tensor", None, "fsdp")  # [L, N, Hd, D]
    assert layers["gate"].sharding.spec == P(None, "fsdp", "tensor")  # [L, D, F]
    assert params["embed"].sharding.spec == P("tensor", "fsdp")  # [V, D]
    assert params["lm_head"].sharding.spec == P("fsdp", "tensor")  # [D, V]
    # Each device really holds only its shard.
    shard = layers["q"].addressable_shards[0].data
    assert shard.shape == (cfg.num_layers, cfg.embed_dim // 2, cfg.num_heads // 2, cfg.head_dim)
    sampling, _ = load_hf_decoder(tiny_checkpoint, mesh=mesh, rules=SAMPLING_RULES)
    assert sampling["layers"]["q"].sharding.spec == P(None, None, "tensor", None)


def test_sharded_forward_equals_single_device(tiny_checkpoint):
    single, cfg = load_hf_decoder(tiny_checkpoint)
    mesh = make_mesh(MESH)
    rules = normalize_rules(TRAIN_RULES)
    sharded, _ = load_hf_decoder(tiny_checkpoint, mesh=mesh, rules=rules)
    tokens, mask = padded_batch(cfg.vocab_size, [32, 20, 9, 32], 32, left=True)
    pos = decoder.positions_from_mask(jnp.asarray(mask))
    ref, _ = decoder.jit_forward(
        single, jnp.asarray(tokens), pos, cfg, token_mask=jnp.asarray(mask)
    )

    batch_sharding = jax.sharding.NamedSharding(mesh, P(("data", "fsdp"), None))
    args = [jax.device_put(jnp.asarray(x), batch_sharding) for x in (tokens, pos, mask)]
    out, _ = decoder.jit_forward(
        sharded, args[0], args[1], cfg, token_mask=args[2], mesh=mesh, rules=rules
    )
    assert len(out.sharding.device_set) == 8
    np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(ref)[mask], atol=1e-5)
