"""SFT rows that open with the same prompt: the prefix runs once per batch, and the loss, the
gradients and the trained parameters are those of the plain batches."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ml_collections import ConfigDict

from memjax.models import decoder
from memjax.models.params import init_params
from memjax.models.shared_prefix import prefix_groups, shared_length
from memjax.sft import batches as batches_lib
from memjax.sft.rows import Row
from memjax.sft.run_config import SFTRunConfig
from memjax.sft.step import nll_objective
from memjax.sft.task import SFTTask
from tests.sft.test_sft import CFG


def _prompted_rows(n: int, prompt_len: int, tail=(20, 31), seed: int = 0, prompt=None) -> list:
    """n rows: one shared prompt, then a row's own untrained tokens, then a trained answer."""
    rng = np.random.default_rng(seed)
    if prompt is None:
        prompt = rng.integers(3, CFG.vocab_size, prompt_len)
    rows = []
    for i in range(n):
        own = rng.integers(3, CFG.vocab_size, int(rng.integers(*tail)))
        tokens = np.concatenate([prompt, own]).astype(np.int32)
        mask = np.zeros(len(tokens), bool)
        mask[len(prompt) + len(own) // 2 :] = True
        rows.append(Row(tokens, mask, i))
    return rows


def _arrays(batch):
    return {k: jnp.asarray(v) for k, v in batch.items()}


def test_a_shared_prefix_batch_gives_the_plain_loss_and_gradients():
    jax.config.update("jax_default_matmul_precision", "highest")
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(0))
    rows = _prompted_rows(4, prompt_len=40)
    plain = batches_lib.make_batch(rows, range(4), 0, bucket=16, max_len=128)
    shared = batches_lib.make_batch(rows, range(4), 0, bucket=16, max_len=128, share_prefix=16)
    # 40 shared prompt tokens, rounded down to the bucket: 32 run once, the rest per row.
    assert shared["prefix"].shape == (4, 32) and "prefix" not in plain
    assert (shared["prefix"] == rows[0].tokens[:32]).all()
    assert shared["loss_mask"].sum() == plain["loss_mask"].sum()
    objective = nll_objective(CFG, "token-mean", vocab_chunk=16)
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, b: objective(p, b)[0]))
    loss, grads = value_and_grad(params, _arrays(plain))
    shared_loss, shared_grads = value_and_grad(params, _arrays(shared))
    np.testing.assert_allclose(shared_loss, loss, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(shared_grads), jax.tree.leaves(grads)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_the_prefix_stops_at_the_first_trained_or_differing_token():
    a = np.arange(100, dtype=np.int32)
    b = a.copy()
    b[70] = 0
    untrained = np.zeros(100, bool)
    assert shared_length([a, b], [untrained] * 2, granularity=16, minimum=16) == 64
    trained = untrained.copy()
    trained[40:] = True
    assert shared_length([a, b], [untrained, trained], granularity=16, minimum=16) == 32
    assert shared_length([a, b], [untrained, trained], granularity=16, minimum=48) == 0
    c = a.copy()
    c[3] = 0
    assert shared_length([a, c], [untrained] * 2, granularity=1, minimum=1) == 3
    assert shared_length([a[:9], a], [untrained] * 2, granularity=1, minimum=1) == 8  # one left
    groups = prefix_groups([a, b, c, a[:10]], [untrained, untrained, untrained, untrained], 16)
    assert groups[0] == groups[1] != groups[2] and groups[3] is None
    assert prefix_groups([a], [trained], 48) == [None]  # trains a token of the would-be prefix


def test_rows_that_open_alike_share_batches_and_every_row_is_seen():
    rows = _prompted_rows(7, 40, seed=1) + _prompted_rows(5, 40, seed=2)
    rows += [Row(np.arange(3, 40, dtype=np.int32), np.ones(37, bool), 99)]  # trains its start
    # Alone in its group (and in row 99's length bucket): batched by length, not repeated.
    rows += _prompted_rows(1, 40, tail=(20, 21), seed=5)
    groups = prefix_groups([r.tokens for r in rows], [r.loss_mask for r in rows], 32)
    lengths = [len(r.tokens) for r in rows]
    shape = dict(batch_rows=2, bucket=64, max_len=128, groups=groups)
    plan = batches_lib.batch_plan(lengths, seed=0, epochs=1, **shape)
    assert len(plan) == batches_lib.batches_per_epoch(lengths, **shape)
    assert set(np.concatenate(plan)) == set(range(len(rows)))
    lone = len(rows) - 1
    for batch in plan:
        members = {groups[int(i)] for i in batch}
        made = batches_lib.make_batch(rows, batch, 0, bucket=16, max_len=128, share_prefix=32)
        if lone in batch:  # batched with the ungrouped row, without a shared prefix
            assert len(members) == 2 and "prefix" not in made
            continue
        assert len(members) == 1
        assert ("prefix" in made) == (groups[int(batch[0])] is not None)


def _task(shared_prefix: int, rows) -> SFTTask:
    section = ConfigDict(
        {
            "num_steps": 3,
            "seed": 0,
            "eval_every": 0,
            "checkpoint_every": 0,
            "keep_last": 1,
            "keep_best": 0,
            "batch_rows": 4,
            "micro_batches": 2,
            "max_seq_len": 128,
            "bucket": 16,
            "vocab_chunk": 16,
            "shared_prefix": shared_prefix,
            "optimizer": {"learning_rate": 3e-3, "weight_decay": 0.0},
            "mesh": None,
        }
    )
    rc = SFTRunConfig.from_section(section)
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(1))
    return SFTTask(rc, params=params, cfg=CFG, train_rows=rows)


def test_training_with_a_shared_prefix_ends_with_the_plain_parameters():
    """Rows of one prompt and one length bucket: the same batch plan either way, so three
    micro-batched AdamW steps must end at the same parameters."""
    jax.config.update("jax_default_matmul_precision", "highest")
    rows = _prompted_rows(8, prompt_len=50, tail=(20, 30), seed=3)
    results = {}
    for shared_prefix in (0, 16):
        task = _task(shared_prefix, rows)
        records = [task.step(s, None)[0] for s in range(3)]
        results[shared_prefix] = (task.states["policy"].params, records)
    assert all(r["shared_prefix"] == 48 for r in results[16][1])
    assert all(r["shared_prefix"] == 0 for r in results[0][1])
    for a, b in zip(results[0][1], results[16][1]):
        np.testing.assert_allclose(a["loss"], b["loss"], rtol=1e-5)
        assert a["row_len"] == b["row_len"]
    for a, b in zip(jax.tree.leaves(results[0][0]), jax.tree.leaves(results[16][0])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-6)


@pytest.mark.heavy  # the sharded step's equivalence runs by default in tests/rl/test_train_step
def test_a_sharded_shared_prefix_step_equals_the_single_device_one():
    """The one-row prefix pass under a data x fsdp x tensor mesh: replicated over the batch
    axes, its gradient summed over every device's rows."""
    from memjax.parallel import make_mesh
    from memjax.sft.step import sft_train_step
    from memjax.training import train_step
    from memjax.training.optimizer import OptimizerConfig, make_optimizer

    jax.config.update("jax_default_matmul_precision", "highest")
    params = init_params(decoder.decoder_abstract(CFG), jax.random.key(2))
    rows = _prompted_rows(8, prompt_len=40, seed=4)
    batch = batches_lib.make_batch(rows, range(8), 0, bucket=16, max_len=128, share_prefix=16)
    assert "prefix" in batch
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-2, eps=1e-3, max_grad_norm=1.0))
    copy = lambda: jax.tree.map(jnp.array, params)
    single = sft_train_step(CFG, opt, vocab_chunk=16, num_micro_batches=2, donate=False)
    s_state, s_metrics = single(train_step.init_train_state(copy(), opt), batch)
    mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    sh = train_step.train_state_shardings(decoder.decoder_abstract(CFG), opt, mesh)
    step = sft_train_step(
        CFG, opt, vocab_chunk=16, num_micro_batches=2, mesh=mesh, state_shardings=sh
    )
    m_state, m_metrics = step(train_step.init_train_state(copy(), opt, sh), batch)
    for a, b in zip(jax.tree.leaves(s_state), jax.tree.leaves(m_state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for k in s_metrics:
        np.testing.assert_allclose(s_metrics[k], m_metrics[k], rtol=1e-5, atol=1e-5, err_msg=k)
