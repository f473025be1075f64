"""GRPO groups share their prompt in the update (memjax.rl.shared_prefix): the rows regrouped
and cut after the prefix give the plain batch's loss, gradients, metrics and log-probs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from memjax.models import decoder
from memjax.models.params import init_params
from memjax.models.shared_prefix import PREFIX_PAD
from memjax.parallel import make_mesh
from memjax.rl import shared_prefix, steps, toy
from memjax.rl.rollout import Context, Trajectory, pack
from memjax.training import train_step
from memjax.training.logprobs import make_logprob_fn, trained_positions
from tests.rl.test_train_step import CFG, LOSS
from tests.rl.test_trainer import _config, _run


def _grpo_batch(groups=3, G=4, T=64, opening=16, seed=0, empty_rows=0):
    """`groups` prompts (a common opening of `opening` tokens, then their own 14-25 tokens),
    G sampled completions each (3-12 tokens), packed right-padded as the trainer packs them."""
    rng = np.random.default_rng(seed)
    common = rng.integers(3, CFG.vocab_size, opening).tolist()
    trajs = []
    for g in range(groups):
        prompt = common + rng.integers(3, CFG.vocab_size, int(rng.integers(14, 26))).tolist()
        for _ in range(G):
            ctx = Context()
            ctx.extend(prompt, trainable=False)
            n = int(rng.integers(3, 13))
            ctx.extend(rng.integers(3, CFG.vocab_size, n), True, rng.normal(-2.0, 0.5, n))
            trajs.append(Trajectory(group=g, contexts=[ctx]))
    batch = pack(trajs, T, row_multiple=groups * G + empty_rows)
    batch.pop("trajectory"), batch.pop("truncated_rows")
    mask = batch["loss_mask"]
    B = len(mask)
    batch["advantages"] = (rng.normal(size=(B, 1)) * mask).astype(np.float32)
    batch["old_logp"] = batch["sampler_logp"] + (0.1 * rng.normal(size=mask.shape) * mask)
    batch["old_logp"] = batch["old_logp"].astype(np.float32)
    batch["ref_logp"] = (batch["sampler_logp"] - 0.2 * mask).astype(np.float32)
    batch.update(trained_positions(mask, 16))
    return batch


@pytest.fixture(scope="module")
def params():
    return jax.jit(lambda k: init_params(decoder.decoder_abstract(CFG), k))(jax.random.key(0))


def test_each_micro_batch_shares_its_own_prompt_and_the_trained_tokens_stay_put():
    batch = _grpo_batch()
    shared, order = shared_prefix.share_prefixes(batch, 3, granularity=8, minimum=8)
    prompts = [int(np.flatnonzero(batch["loss_mask"][4 * g])[0]) for g in range(3)]
    P = shared["prefix"].shape[1]
    assert max(prompts) // 8 * 8 == P
    cut_at = np.zeros(12, int)
    for j in range(3):  # the strided split's micro-batch j: one group, its own prefix
        rows = order[j::3]
        assert len(set((rows // 4).tolist())) == 1
        own = prompts[rows[0] // 4] // 8 * 8  # its prompt, rounded down to the granularity
        prefix = shared["prefix"][j::3]
        assert (prefix[:, :own] == batch["tokens"][rows[0], :own]).all()
        assert (prefix[:, own:] == PREFIX_PAD).all()
        cut_at[j::3] = own
    # the remainder holds every real token after its row's own prefix, nothing past the longest
    lengths = batch["token_mask"].sum(axis=1)[order]
    assert shared["tokens"].shape[1] == -(-(lengths - cut_at).max() // 8) * 8
    assert shared["token_mask"].sum() == (lengths - cut_at).sum()
    assert shared["loss_mask"].sum() == batch["loss_mask"].sum()
    for r, src in enumerate(order):
        valid = shared["loss_valid"][r]
        cut = shared["tokens"][r, shared["loss_positions"][r][valid]]
        whole = batch["tokens"][src, batch["loss_positions"][src][valid]]
        np.testing.assert_array_equal(cut, whole)
    back = shared_prefix.restore_order(shared["loss_valid"], order)
    np.testing.assert_array_equal(back, batch["loss_valid"])


def test_too_short_a_shared_prefix_leaves_the_batch_whole():
    batch = _grpo_batch()
    shared, order = shared_prefix.share_prefixes(batch, 3, granularity=8, minimum=32)
    assert "prefix" not in shared
    np.testing.assert_array_equal(shared["tokens"], batch["tokens"][order])


@pytest.mark.parametrize(
    "micro_batches, empty_rows, expect_prefix",
    # the longest micro-batch's prefix; the shorter ones (24 tokens; 16: the opening only) padded.
    # The default run keeps the case with empty rows and a padded shorter prefix; the rest heavy.
    [
        (2, 4, 24),
        pytest.param(3, 0, 32, marks=pytest.mark.heavy),
        pytest.param(6, 0, 32, marks=pytest.mark.heavy),
        pytest.param(1, 0, 16, marks=pytest.mark.heavy),
        pytest.param(4, 4, 32, marks=pytest.mark.heavy),
    ],
)
def test_a_shared_prefix_step_is_the_plain_step(params, micro_batches, empty_rows, expect_prefix):
    jax.config.update("jax_default_matmul_precision", "highest")
    batch = _grpo_batch(empty_rows=empty_rows)
    shared, _ = shared_prefix.share_prefixes(batch, micro_batches, granularity=8, minimum=8)
    assert shared["prefix"].shape[1] == expect_prefix
    opt = optax.sgd(0.5)
    results = []
    for b in (batch, shared):
        step = steps.policy_train_step(
            CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=micro_batches
        )
        state = train_step.init_train_state(jax.tree.map(jnp.copy, params), opt)
        results.append(step(state, b))
    (plain_state, plain), (shared_state, metrics) = results
    for k in plain:
        np.testing.assert_allclose(metrics[k], plain[k], rtol=2e-4, atol=1e-6, err_msg=k)
    assert float(plain["grad_norm"]) > 0
    for a, b in zip(jax.tree.leaves(shared_state.params), jax.tree.leaves(plain_state.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.heavy  # blocks against one piece run by default in tests/models/test_causal_attention
def test_query_blocks_leave_the_plain_and_the_shared_prefix_step_unchanged(params):
    """Attention by query blocks of 8 (decoder.causal_attention over whole rows, and
    cached_attention over the shared prompt's keys) gives the one-piece plain step."""
    jax.config.update("jax_default_matmul_precision", "highest")
    batch = _grpo_batch()
    shared, _ = shared_prefix.share_prefixes(batch, 3, granularity=8, minimum=8)
    assert shared["tokens"].shape[1] > 8  # the remainders span several blocks
    opt = optax.sgd(0.5)
    one_piece, blocks = CFG.replace(attention_query_block=0), CFG.replace(attention_query_block=8)
    results = []
    for cfg, b in ((one_piece, batch), (blocks, batch), (blocks, shared)):
        step = steps.policy_train_step(cfg, LOSS, opt, vocab_chunk=16, num_micro_batches=3)
        state = train_step.init_train_state(jax.tree.map(jnp.copy, params), opt)
        results.append(step(state, b))
    (one_state, one), *blocked = results
    for state, metrics in blocked:
        for k in one:
            np.testing.assert_allclose(metrics[k], one[k], rtol=2e-4, atol=1e-6, err_msg=k)
        for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(one_state.params)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_shared_prefix_log_probs_are_the_plain_ones(params):
    jax.config.update("jax_default_matmul_precision", "highest")
    batch = _grpo_batch(groups=4)  # 16 rows: 4 chunks of 4 rows, one group each
    fn = make_logprob_fn(CFG, chunk=16, rows_per_device=4)
    plain = fn(params, batch["tokens"], batch["token_mask"], batch["loss_positions"])
    shared, order = shared_prefix.share_prefixes(batch, 4, granularity=8, minimum=8)
    cut = fn(
        params, shared["tokens"], shared["token_mask"], shared["loss_positions"], shared["prefix"]
    )
    cut = shared_prefix.restore_order(np.asarray(cut), order)
    valid = batch["loss_valid"]
    np.testing.assert_allclose(cut[valid], np.asarray(plain)[valid], rtol=1e-5, atol=1e-5)


class LongPromptEnv(toy.RepeatTargetEnv):
    """The toy task behind a 13-token instruction every prompt opens with."""

    def reset(self, example):
        target, prompt = super().reset(example)
        return target, [prompt[0], *range(3, 15), *prompt[1:]]


@pytest.mark.parametrize(
    "algo, lora_rank",
    [
        ("grpo", 0),
        pytest.param("ppo", 0, marks=pytest.mark.heavy),
        pytest.param("grpo", 4, marks=pytest.mark.heavy),
    ],
)
def test_training_with_shared_prefixes_matches_training_without(
    tmp_path, monkeypatch, algo, lora_rank
):
    """Two steps of the trainer, old and reference log-probs recomputed, 4 micro-batches: the
    same parameters with and without rl.shared_prefix (PPO's critic runs whole rows)."""
    jax.config.update("jax_default_matmul_precision", "highest")
    from memjax.rl import trainer

    monkeypatch.setattr(trainer, "SHARED_PREFIX_GRANULARITY", 4)
    prefixes = []

    def spy(*args, **kwargs):
        out = shared_prefix.share_prefixes(*args, **kwargs)
        prefixes.append(out[0]["prefix"].shape[1])
        return out

    monkeypatch.setattr(trainer, "share_prefixes", spy)
    monkeypatch.setattr(toy, "RepeatTargetEnv", LongPromptEnv)  # _run builds its env from it
    results = []
    for shared in (0, 8):
        c = _config(algo, num_steps=2, micro_batches=4, seq_len=24, shared_prefix=shared)
        c.model.vocab_size = max(c.model.vocab_size, 16)
        c.lora.rank = lora_rank
        results.append(_run(c, tmp_path / f"shared{shared}"))
    plain, shared = results
    # every update and log-prob pass of the shared run ran the 15-token prompt's first 12 once
    assert prefixes and set(prefixes) == {12}
    assert [h["reward"] for h in plain["history"]] == [h["reward"] for h in shared["history"]]
    for a, b in zip(jax.tree.leaves(shared["params"]), jax.tree.leaves(plain["params"])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.heavy  # the sharded step's equivalence runs by default in test_train_step
def test_a_sharded_shared_prefix_step_is_the_single_device_plain_step(params):
    """Data x fsdp x tensor over 8 devices, each micro-batch's 4 rows (one group) spread over
    the 4 batch shards: the prefix still runs once per micro-batch, with the plain result."""
    jax.config.update("jax_default_matmul_precision", "highest")
    batch = _grpo_batch(groups=4)
    shared, _ = shared_prefix.share_prefixes(batch, 4, granularity=8, minimum=8)
    opt = optax.sgd(0.5)
    plain_step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=4)
    plain_state, plain = plain_step(
        train_step.init_train_state(jax.tree.map(jnp.copy, params), opt), batch
    )
    mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    sh = train_step.train_state_shardings(decoder.decoder_abstract(CFG), opt, mesh)
    step = steps.policy_train_step(
        CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=4, mesh=mesh, state_shardings=sh
    )
    state = train_step.init_train_state(jax.tree.map(jnp.copy, params), opt, sh)
    state, metrics = step(state, shared)
    for k in plain:
        np.testing.assert_allclose(metrics[k], plain[k], rtol=2e-4, atol=1e-6, err_msg=k)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(plain_state.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
