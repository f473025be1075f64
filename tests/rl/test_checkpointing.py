"""Checkpoints: every item round-trips, keep-last-N + keep-best, restore onto another mesh."""

import json

import grain
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from memjax.parallel import make_mesh
from memjax.training.checkpointing import Checkpointer, CheckpointError


def _state(x):
    return {
        "params": {"w": jnp.arange(16.0).reshape(4, 4) * x},
        "step": jnp.int32(x),
        "rng": jax.random.key_data(jax.random.key(x)),
    }


def _abstract(mesh, spec):
    def sds(a, s):
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, s))

    st = _state(0)
    return {
        "params": {"w": sds(st["params"]["w"], spec)},
        "step": sds(st["step"], PartitionSpec()),
        "rng": sds(st["rng"], PartitionSpec()),
    }


def test_roundtrip_all_items_and_iterator_position(tmp_path):
    ds = grain.MapDataset.range(100).shuffle(seed=3).to_iter_dataset()
    it = iter(ds)
    first = [next(it) for _ in range(5)]
    ck = Checkpointer(tmp_path / "ck", keep_last=2)

    def write_bank(path):
        (path / "bank.jsonl").write_text(json.dumps({"id": 1, "text": "likes tea"}) + "\n")

    ck.save(5, _state(5), data_iterator=it, extra={"bank_size": 1}, dirs={"banks": write_bank})
    after = [next(it) for _ in range(3)]
    ck.wait()
    it2 = iter(ds)
    mesh = make_mesh({"data": 8})
    out = ck.restore(
        _abstract(mesh, PartitionSpec()),
        data_iterator=it2,
        with_extra=True,
        dirs={"banks": lambda p: (p / "bank.jsonl").read_text()},
    )
    assert out["step"] == 5 and out["extra"] == {"bank_size": 1}
    assert json.loads(out["dir_banks"])["text"] == "likes tea"
    np.testing.assert_array_equal(out["state"]["params"]["w"], _state(5)["params"]["w"])
    np.testing.assert_array_equal(out["state"]["rng"], _state(5)["rng"])
    assert [next(it2) for _ in range(3)] == after  # the pipeline resumes where it was
    assert len(set(first) | set(after)) == 8
    ck.close()


def test_keep_last_and_best_and_restore_onto_another_mesh(tmp_path):
    mesh_a = make_mesh({"data": 2, "fsdp": 4})
    ck = Checkpointer(tmp_path / "ck", keep_last=2, keep_best=1, best_metric="reward")
    rewards = {1: 0.1, 2: 0.9, 3: 0.2, 4: 0.3, 5: 0.25}
    for step, r in rewards.items():
        st = jax.device_put(
            _state(step),
            jax.tree.map(lambda s: s.sharding, _abstract(mesh_a, PartitionSpec("fsdp", "data"))),
        )
        ck.save(step, st, metrics={"reward": r})
    ck.wait()
    assert ck.all_steps() == [2, 4, 5]  # last two plus the best
    assert ck.best_step() == 2
    ck.close()
    # a fresh manager (a restarted run) on a different mesh layout
    mesh_b = make_mesh({"data": 2, "tensor": 4})
    ck2 = Checkpointer(tmp_path / "ck", keep_last=2, keep_best=1, best_metric="reward")
    out = ck2.restore(_abstract(mesh_b, PartitionSpec("tensor", "data")), step=2)
    w = out["state"]["params"]["w"]
    assert w.sharding.spec == PartitionSpec("tensor", "data")
    np.testing.assert_array_equal(w, _state(2)["params"]["w"])
    with pytest.raises(CheckpointError, match="step 3"):
        ck2.restore(_abstract(mesh_b, PartitionSpec()), step=3)
    ck2.close()


def test_empty_directory_is_a_clear_error(tmp_path):
    ck = Checkpointer(tmp_path / "none")
    assert ck.latest_step() is None
    with pytest.raises(CheckpointError, match="no checkpoint"):
        ck.restore(_state(0))
    ck.close()
