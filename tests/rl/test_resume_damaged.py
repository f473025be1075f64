"""Resume past a damaged newest step, and refusal of a checkpoint that does not fit the run.

Each damage is one a crash or a full disk leaves behind: a deleted `_METADATA`, a deleted array
chunk, a truncated grain iterator state, a corrupt extra JSON, a missing directory item. Resume
must skip that step with one warning line naming the item, restore the previous step exactly
(arrays, iterator position, extra, directory item), and let the run save the step number again.
"""

import json
import logging
import shutil

import grain
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.errors import CheckpointError, UserError
from memjax.training.checkpointing import Checkpointer

STEPS = (1, 2, 3)


def _state(x):
    # [64, 64] and [300]: large enough that their chunks are separate files of the array store
    return {
        "params": {"w": jnp.arange(4096.0).reshape(64, 64) * x, "b": jnp.ones(300) * x},
        "step": jnp.int32(x),
    }


def _dataset():
    return grain.MapDataset.range(1000).shuffle(seed=3).to_iter_dataset()


def _write_run(directory, run_spec=None):
    """Steps 1..3, each after 4 more examples; returns what follows each step's position."""
    it = iter(_dataset())
    ck = Checkpointer(directory, keep_last=5)
    following = {}
    for step in STEPS:
        for _ in range(4):
            next(it)
        ck.save(
            step,
            _state(step),
            data_iterator=it,
            extra={"step": step},
            dirs={"env": lambda p, s=step: (p / "bank.json").write_text(json.dumps(s))},
            run_spec=run_spec,
        )
        ck.wait()
        probe = iter(_dataset())
        probe.set_state(it.get_state())
        following[step] = [next(probe) for _ in range(3)]
    ck.close()
    return following


def _delete_largest_chunk(step_dir):
    chunks = sorted(
        (step_dir / "state").rglob("ocdbt.process_*/d/*"), key=lambda p: p.stat().st_size
    )
    chunks[-1].unlink()


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "deleted _METADATA": (lambda d: (d / "state" / "_METADATA").unlink(), "state"),
    "deleted array chunk": (_delete_largest_chunk, "state"),
    "truncated iterator state": (lambda d: _truncate(d / "data" / "process_0-of-1.json"), "data"),
    "corrupt extra JSON": (lambda d: (d / "extra" / "metadata").write_text("{oops"), "extra"),
    "missing env dir": (lambda d: shutil.rmtree(d / "dir_env"), "dir_env"),
}


def _restore(directory, abstract=None, run_spec=None):
    it = iter(_dataset())
    ck = Checkpointer(directory, keep_last=5)
    out = ck.restore(
        abstract if abstract is not None else _state(0),
        data_iterator=it,
        with_extra=True,
        dirs={"env": lambda p: json.loads((p / "bank.json").read_text())},
        run_spec=run_spec,
    )
    return ck, out, it


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_resume_skips_a_damaged_newest_step(tmp_path, caplog, capfd, damage):
    directory = tmp_path / "ck"
    following = _write_run(directory)
    damage_fn, item = DAMAGE[damage]
    damage_fn(directory / "3")
    with caplog.at_level(logging.WARNING):
        ck, out, it = _restore(directory)
    assert out["step"] == 2 and out["extra"] == {"step": 2} and out["dir_env"] == 2
    for name, leaf in _state(2)["params"].items():
        np.testing.assert_array_equal(out["state"]["params"][name], leaf)
    assert int(out["state"]["step"]) == 2
    assert [next(it) for _ in range(3)] == following[2]  # the pipeline resumes at step 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    skipped = [w for w in warnings if "skipped" in w and "/3:" in w]
    assert len(skipped) == 1 and f"item {item}" in skipped[0], warnings
    assert all("\n" not in w for w in warnings)
    assert "Traceback" not in capfd.readouterr().err
    # the damaged step is kept aside and its number can be saved again
    assert (directory / "damaged" / "3").is_dir() and ck.all_steps() == [1, 2]
    ck.save(3, _state(30))
    ck.wait()
    assert ck.all_steps() == [1, 2, 3]
    ck.close()


def test_every_step_damaged_is_one_error_and_nothing_moves(tmp_path):
    directory = tmp_path / "ck"
    _write_run(directory)
    for step in STEPS:
        (directory / str(step) / "state" / "_METADATA").unlink()
    with pytest.raises(CheckpointError, match=r"no complete checkpoint \(step 3: item state"):
        _restore(directory)
    assert not (directory / "damaged").exists()
    assert sorted(p.name for p in directory.iterdir() if p.name.isdigit()) == ["1", "2", "3"]


def test_explicit_damaged_step_is_an_error_naming_the_item(tmp_path):
    directory = tmp_path / "ck"
    _write_run(directory)
    _truncate(directory / "2" / "data" / "process_0-of-1.json")
    ck = Checkpointer(directory, keep_last=5)
    with pytest.raises(CheckpointError, match=r"ck/2: item data is unreadable"):
        ck.restore(_state(0), step=2, data_iterator=iter(_dataset()))
    ck.close()


def test_changed_run_spec_is_refused_naming_the_field(tmp_path):
    directory = tmp_path / "ck"
    saved = {"algo": "grpo", "model": {"num_layers": 2, "embed_dim": 64}, "lora": False}
    _write_run(directory, run_spec=saved)
    now = {"algo": "ppo", "model": {"num_layers": 4, "embed_dim": 64}, "lora": False}
    with pytest.raises(CheckpointError) as info:
        _restore(directory, run_spec=now)
    message = str(info.value)
    assert message == f"{directory}/3: saved algo=grpo, now ppo; saved model.num_layers=2, now 4"
    assert isinstance(info.value, UserError)
    assert not (directory / "damaged").exists()  # a mismatch is not damage: nothing moves
    # the same spec restores; a field the checkpoint predates is not a difference
    ck, out, _ = _restore(directory, run_spec={**saved, "optimizer": {"kind": "adamw"}})
    assert out["step"] == 3
    ck.close()


def test_changed_array_shapes_are_refused_naming_the_leaf(tmp_path):
    directory = tmp_path / "ck"
    _write_run(directory)
    wider = _state(0)
    wider["params"]["w"] = jnp.zeros((64, 128))
    with pytest.raises(
        CheckpointError, match=r"params\.w has shape \(64, 64\) saved, \(64, 128\) now"
    ):
        _restore(directory, abstract=wider)
    with_critic = {**_state(0), "critic": {"v": jnp.zeros(3), "w": jnp.zeros(2)}}
    with pytest.raises(CheckpointError, match=r"fit this run: critic \(2 arrays\) is not in the"):
        _restore(directory, abstract=with_critic)
    with_bias = _state(0)
    with_bias["params"]["c"] = jnp.zeros(2)
    with pytest.raises(CheckpointError, match=r"params\.c is not in the checkpoint$"):
        _restore(directory, abstract=with_bias)
    assert not (directory / "damaged").exists()


def test_run_spec_from_config_picks_the_state_shaping_fields():
    from ml_collections import ConfigDict

    from memjax.training.checkpoint_checks import run_spec_from_config, spec_differences

    config = ConfigDict(
        dict(
            algo="grpo",
            model=dict(num_layers=2, embed_dim=64, remat="full"),
            optimizer=dict(learning_rate=1e-3),
        )
    )
    spec = run_spec_from_config(config)
    assert spec == {"algo": "grpo", "model.embed_dim": 64, "model.num_layers": 2}
    config.optimizer.learning_rate, config.model.remat = 5e-4, "none"  # may change on restart
    assert spec_differences(spec, run_spec_from_config(config)) == []
    config.model.num_layers = 4
    assert spec_differences(spec, run_spec_from_config(config)) == [
        "saved model.num_layers=2, now 4"
    ]
