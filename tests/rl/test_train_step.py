"""The train step: micro-batch accumulation == full batch, sharded == single device, skips."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from memjax.models import decoder
from memjax.models.config import DecoderConfig
from memjax.models.params import init_params
from memjax.parallel import make_mesh
from memjax.rl import critic, losses, steps
from memjax.training import train_step
from memjax.training.logprobs import make_logprob_fn
from memjax.training.optimizer import OptimizerConfig, make_optimizer

CFG = DecoderConfig(
    "llama",
    vocab_size=40,
    embed_dim=16,
    mlp_dim=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=4,
)
LOSS = losses.PolicyLossConfig(
    eps_low=0.2,
    eps_high=0.28,
    dual_clip=3.0,
    kl_coef=0.1,
    entropy_coef=0.01,
    agg_mode="seq-mean-token-mean",
)


def _batch(seed=0, B=8, T=10):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, CFG.vocab_size, (B, T)).astype(np.int32)
    lengths = rng.integers(5, T + 1, B)
    token_mask = np.arange(T)[None] < lengths[:, None]
    loss_mask = token_mask & (np.arange(T)[None] >= 3)  # first 3 tokens are the prompt
    tokens = np.where(token_mask, tokens, 0)
    adv = rng.normal(size=(B, 1)).astype(np.float32) * loss_mask
    old = (-3.0 + 0.3 * rng.normal(size=(B, T))).astype(np.float32)
    ref = (-3.0 + 0.3 * rng.normal(size=(B, T))).astype(np.float32)
    return {
        "tokens": tokens,
        "token_mask": token_mask,
        "loss_mask": loss_mask,
        "advantages": adv,
        "old_logp": old,
        "ref_logp": ref,
        "sampler_logp": old,
    }


@pytest.fixture(scope="module")
def params():
    return jax.jit(lambda k: init_params(decoder.decoder_abstract(CFG), k))(jax.random.key(0))


def _copy(tree):
    return jax.tree.map(lambda x: jnp.array(x, copy=True), tree)


def test_microbatch_accumulation_equals_full_batch(params):
    opt = optax.sgd(0.5)
    batch = _batch()
    results = []
    for m in (1, 4):
        step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=m)
        state = train_step.init_train_state(_copy(params), opt)
        state, metrics = step(state, batch)
        results.append((state, metrics))
    (s1, m1), (s4, m4) = results
    for a, b in zip(jax.tree.leaves(s1.params), jax.tree.leaves(s4.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for k in m1:
        np.testing.assert_allclose(m1[k], m4[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(s4.step) == 1 and int(s4.skipped) == 0
    # On-policy first step: the ratio is exp(logp - old); sanity of the metrics
    assert 0.0 <= float(m1["clip_frac"]) <= 1.0 and float(m1["grad_norm"]) > 0


def test_sharded_step_equals_single_device(params):
    # The real chain (clip, AdamW). Adam's first step is g / (|g| + eps): with a tiny eps it
    # amplifies float-summation-order noise on near-zero gradients, so eps is set to 1e-3 here.
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-2, eps=1e-3, max_grad_norm=1.0))
    batch = _batch(seed=1)
    single = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=2)
    s_state, s_metrics = single(train_step.init_train_state(_copy(params), opt), batch)

    mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    sh = train_step.train_state_shardings(decoder.decoder_abstract(CFG), opt, mesh)
    step = steps.policy_train_step(
        CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=2, mesh=mesh, state_shardings=sh
    )
    state = train_step.init_train_state(_copy(params), opt, sh)
    assert state.params["layers"]["q"].sharding.spec == sh.params["layers"]["q"].spec
    m_state, m_metrics = step(state, batch)
    assert len(m_state.params["layers"]["gate"].sharding.device_set) == 8
    for a, b in zip(jax.tree.leaves(s_state), jax.tree.leaves(m_state)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for k in s_metrics:
        np.testing.assert_allclose(s_metrics[k], m_metrics[k], rtol=1e-5, atol=1e-5, err_msg=k)


def test_non_finite_update_is_skipped_and_counted(params):
    opt = optax.adamw(1e-2)
    batch = _batch(seed=2)
    batch["advantages"] = np.where(batch["loss_mask"], np.nan, 0.0).astype(np.float32)
    step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, donate=False)
    state = train_step.init_train_state(_copy(params), opt)
    new, metrics = step(state, batch)
    assert int(new.skipped) == 1 and int(new.step) == 0
    assert float(metrics["skipped_update"]) == 1.0
    for a, b in zip(
        jax.tree.leaves((state.params, state.opt_state)),
        jax.tree.leaves((new.params, new.opt_state)),
    ):
        np.testing.assert_array_equal(a, b)


def test_policy_step_lowers_the_loss_and_on_policy_ratio_is_one(params):
    opt = optax.adam(3e-3)
    batch = _batch(seed=3)
    lp = make_logprob_fn(CFG, chunk=16)(params, batch["tokens"], batch["token_mask"])
    batch["old_logp"] = np.asarray(lp)
    step = steps.policy_train_step(CFG, losses.PolicyLossConfig(), opt, vocab_chunk=16)
    state = train_step.init_train_state(_copy(params), opt)
    state, m0 = step(state, batch)
    np.testing.assert_allclose(m0["ratio_mean"], 1.0, atol=1e-5)
    np.testing.assert_allclose(m0["ratio_std"], 0.0, atol=1e-3)
    for _ in range(3):
        state, m = step(state, batch)
    assert float(m["pg_loss"]) < float(m0["pg_loss"])


def test_critic_step_fits_returns(params):
    opt = optax.adam(1e-2)
    c = critic.critic_from_policy(params, CFG)
    batch = _batch(seed=4)
    returns = (np.asarray(batch["loss_mask"]) * 0.7).astype(np.float32)
    cbatch = {
        "tokens": batch["tokens"],
        "token_mask": batch["token_mask"],
        "loss_mask": batch["loss_mask"],
        "old_values": np.zeros_like(returns),
        "returns": returns,
    }
    step = steps.critic_train_step(CFG, opt, value_clip=None, num_micro_batches=2)
    state = train_step.init_train_state(c, opt)
    state, m0 = step(state, cbatch)
    np.testing.assert_allclose(m0["value_loss"], 0.5 * 0.49, rtol=1e-5)  # head starts at zero
    for _ in range(10):
        state, m = step(state, cbatch)
    assert float(m["value_loss"]) < 0.5 * float(m0["value_loss"])


@pytest.mark.parametrize("sharded", [False, pytest.param(True, marks=pytest.mark.heavy)])
def test_scoring_only_trained_positions_gives_the_same_update(params, sharded):
    """loss_positions / loss_valid (the trainer's batches) change what the unembedding sees,
    not the loss, the gradients or the metrics."""
    from memjax.training.logprobs import position_width, trained_positions

    opt = make_optimizer(OptimizerConfig(learning_rate=1e-2, eps=1e-3, max_grad_norm=1.0))
    batch = _batch(seed=3)
    most = int(batch["loss_mask"].sum(axis=1).max())
    positioned = {**batch, **trained_positions(batch["loss_mask"], position_width(most, 10, 4))}
    kw, sh = {}, None
    if sharded:
        mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
        sh = train_step.train_state_shardings(decoder.decoder_abstract(CFG), opt, mesh)
        kw = {"mesh": mesh, "state_shardings": sh}
    step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=2, **kw)
    s_all, m_all = step(train_step.init_train_state(_copy(params), opt, sh), batch)
    s_pos, m_pos = step(train_step.init_train_state(_copy(params), opt, sh), positioned)
    for a, b in zip(jax.tree.leaves(s_all.params), jax.tree.leaves(s_pos.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for k in m_all:
        np.testing.assert_allclose(m_all[k], m_pos[k], rtol=1e-5, atol=1e-6, err_msg=k)


def _plain_step(params):
    """A fresh policy step (SGD, not donating) and its starting state."""
    opt = optax.sgd(0.1)
    step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, donate=False)
    return step, train_step.init_train_state(_copy(params), opt)


def test_a_cpu_step_that_would_outgrow_the_host_is_refused_before_it_runs(params, monkeypatch):
    from memjax.training import host_memory

    step, state = _plain_step(params)
    monkeypatch.setattr(host_memory, "available_bytes", lambda: 1024)  # 1 KiB left
    with pytest.raises(host_memory.HostMemoryError) as e:
        step(state, _batch())
    message = str(e.value)
    assert "\n" not in message and "the train step over {'advantages': (8, 10)" in message
    assert "GiB of working memory and the host has 0.0 GiB available" in message
    assert "model.remat=dots or full" in message
    monkeypatch.undo()  # the host's own memory: the same step runs
    new, metrics = step(state, _batch())
    assert int(new.step) == 1 and np.isfinite(float(metrics["loss"]))


def test_available_memory_is_read_from_the_kernels_estimate(tmp_path):
    from memjax.training.host_memory import available_bytes

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   12000000 kB\n")
    assert available_bytes(meminfo) == 12000000 * 1024
    assert available_bytes(tmp_path / "missing") is None
    meminfo.write_text("MemTotal:       24000000 kB\n")
    assert available_bytes(meminfo) is None


def test_the_memory_check_and_the_call_share_one_trace_of_the_step(params):
    """On the CPU the first call of each batch shape is lowered ahead for its memory check;
    the call then reuses that trace instead of tracing the step again."""
    step, state = _plain_step(params)
    traces = []
    inner = step._step
    step._step = lambda *args: traces.append(1) or inner(*args)
    state, _ = step(state, _batch(0))
    state, _ = step(state, _batch(1))  # the same shapes: neither traced nor checked again
    assert len(traces) == 1
    step(state, _batch(0, B=4))  # a new shape: one more trace
    assert len(traces) == 2
