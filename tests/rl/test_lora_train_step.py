"""LoRA train steps: only adapters (and the critic's head) learn, the base stays bit-identical,
the reference is the base with adapters off, and sharding/micro-batching change nothing."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from memjax.models import decoder, lora
from memjax.models.config import DecoderConfig
from memjax.models.lora_config import LoraConfig
from memjax.models.params import flatten_with_names, init_params
from memjax.parallel import make_mesh
from memjax.rl import critic, losses, steps
from memjax.training import lora_state, train_step
from memjax.training.logprobs import make_logprob_fn, sequence_logprobs
from memjax.training.optimizer import OptimizerConfig, make_optimizer

CFG = DecoderConfig(
    "qwen2",
    vocab_size=40,
    embed_dim=16,
    mlp_dim=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=4,
    lora=LoraConfig(rank=4, alpha=8.0),
)
LOSS = losses.PolicyLossConfig(kl_coef=0.1, entropy_coef=0.01, agg_mode="seq-mean-token-mean")


def _batch(seed=0, B=8, T=10):
    rng = np.random.default_rng(seed)
    token_mask = np.arange(T)[None] < rng.integers(5, T + 1, B)[:, None]
    tokens = np.where(token_mask, rng.integers(1, CFG.vocab_size, (B, T)), 0).astype(np.int32)
    loss_mask = token_mask & (np.arange(T)[None] >= 3)
    old = (-3.0 + 0.3 * rng.normal(size=(B, T))).astype(np.float32)
    return {
        "tokens": tokens,
        "token_mask": token_mask,
        "loss_mask": loss_mask,
        "advantages": (rng.normal(size=(B, 1)) * loss_mask).astype(np.float32),
        "old_logp": old,
        "ref_logp": old + 0.1,
    }


@pytest.fixture(scope="module")
def base():
    return jax.jit(lambda k: init_params(decoder.decoder_abstract(CFG), k))(jax.random.key(0))


def _adapters(seed=1):
    return lora_state.init_policy_adapters(CFG, jax.random.key(seed))


def _policy_objective(params, mb):
    logp, ent = sequence_logprobs(params, CFG, mb["tokens"], mb["token_mask"], chunk=16)
    return losses.policy_objective(logp, ent, mb, LOSS)


def test_frozen_base_gets_zero_gradient_and_b_drives_the_first_update(base):
    batch = {k: jnp.asarray(v) for k, v in _batch().items()}
    loss = lambda f, a: _policy_objective(lora_state.compose_policy(f, a), batch)[0]
    g_base, g_ad = jax.grad(loss, argnums=(0, 1))(base, _adapters())
    for name, g in flatten_with_names(g_base).items():
        assert not np.asarray(g).any(), name
    for target in CFG.lora.targets:
        # B = 0: dL/dB = s (x A)^T dY is non-zero; dL/dA = s x^T dY B^T is exactly zero.
        assert np.abs(np.asarray(g_ad["layers"][target]["b"])).max() > 0, target
        assert not np.asarray(g_ad["layers"][target]["a"]).any(), target


def test_lora_step_updates_only_adapters_and_learns(base):
    opt = optax.adam(1e-2)
    batch = _batch(seed=3)
    batch["old_logp"] = np.asarray(
        make_logprob_fn(CFG, chunk=16)(base, batch["tokens"], batch["token_mask"])
    )
    step = steps.policy_train_step(
        CFG, losses.PolicyLossConfig(), opt, vocab_chunk=16, **lora_state.policy_step_kwargs(CFG)
    )
    before = jax.tree.map(np.asarray, base)
    start = _adapters()
    state = train_step.init_train_state(jax.tree.map(jnp.copy, start), opt)
    # The optimizer holds moments for the adapters only.
    n_adapter = sum(x.size for x in jax.tree.leaves(start))
    n_opt = sum(x.size for x in jax.tree.leaves(state.opt_state) if x.ndim)
    assert n_opt == 2 * n_adapter
    state, m0 = step(state, batch, base)
    np.testing.assert_allclose(m0["ratio_mean"], 1.0, atol=1e-5)  # B = 0: the policy is the base
    for _ in range(4):
        state, m = step(state, batch, base)
    assert float(m["pg_loss"]) < float(m0["pg_loss"])
    jax.tree.map(np.testing.assert_array_equal, before, jax.tree.map(np.asarray, base))
    for target in CFG.lora.targets:  # after the first update A's gradient is live too
        pair, pair0 = state.params["layers"][target], start["layers"][target]
        assert np.abs(np.asarray(pair["a"]) - np.asarray(pair0["a"])).max() > 0, target
        assert np.abs(np.asarray(pair["b"])).max() > 0, target


def test_reference_is_the_base_with_adapters_off(base):
    trained = jax.tree.map(lambda x: x + 0.05, _adapters())  # B != 0
    batch = _batch(seed=5)
    fn = make_logprob_fn(CFG, chunk=16)
    on = lora.with_adapters(base, trained)
    ref = fn(lora.adapters_off(on), batch["tokens"], batch["token_mask"])
    np.testing.assert_array_equal(ref, fn(base, batch["tokens"], batch["token_mask"]))
    policy = fn(on, batch["tokens"], batch["token_mask"])
    assert np.abs(np.asarray(policy - ref) * batch["loss_mask"]).max() > 1e-3
    # The merged weights the sampler gets give the same log-probs as adapters on the fly.
    merged = lora.merge_adapters(base, trained, CFG)
    np.testing.assert_allclose(
        fn(merged, batch["tokens"], batch["token_mask"]), policy, rtol=1e-5, atol=1e-5
    )


def test_lora_micro_batches_and_sharding_equal_one_device(base):
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-2, eps=1e-3, max_grad_norm=1.0))
    batch = _batch(seed=1)
    kw = lora_state.policy_step_kwargs(CFG)
    results = []
    for m in (1, 4):
        step = steps.policy_train_step(CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=m, **kw)
        results.append(step(train_step.init_train_state(_adapters(), opt), batch, base))

    mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    sh = train_step.train_state_shardings(lora.lora_abstract(CFG), opt, mesh)
    kw = lora_state.policy_step_kwargs(CFG, mesh)
    step = steps.policy_train_step(
        CFG, LOSS, opt, vocab_chunk=16, num_micro_batches=2, mesh=mesh, state_shardings=sh, **kw
    )
    frozen = jax.device_put(base, kw["frozen_shardings"])
    state = train_step.init_train_state(_adapters(), opt, sh)
    results.append(step(state, batch, frozen))
    assert len(results[-1][0].params["layers"]["q"]["b"].sharding.device_set) == 8
    (ref_state, ref_metrics), *others = results
    for got_state, got_metrics in others:
        for a, b in zip(jax.tree.leaves(ref_state), jax.tree.leaves(got_state)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        for k in ref_metrics:
            np.testing.assert_allclose(ref_metrics[k], got_metrics[k], rtol=1e-5, atol=1e-5)


def test_step_refuses_a_missing_or_unexpected_frozen_tree(base):
    opt = optax.sgd(0.1)
    lora_step = steps.policy_train_step(
        CFG, LOSS, opt, vocab_chunk=16, **lora_state.policy_step_kwargs(CFG)
    )
    with pytest.raises(ValueError, match="frozen"):
        lora_step(train_step.init_train_state(_adapters(), opt), _batch())


def test_lora_critic_shares_the_policy_base_and_fits_returns(base):
    opt = optax.adam(1e-2)
    frozen = critic.critic_backbone_of(base)
    assert frozen["layers"]["q"] is base["layers"]["q"]  # one frozen copy for both models
    batch = _batch(seed=4)
    returns = (batch["loss_mask"] * 0.7).astype(np.float32)
    cbatch = {k: batch[k] for k in ("tokens", "token_mask", "loss_mask")}
    cbatch.update(old_values=np.zeros_like(returns), returns=returns)
    step = steps.critic_train_step(CFG, opt, value_clip=None, **critic.critic_step_kwargs(CFG))
    trainable = critic.init_critic_trainable(CFG, jax.random.key(2))
    state = train_step.init_train_state(trainable, opt)
    state, m0 = step(state, cbatch, frozen)
    np.testing.assert_allclose(m0["value_loss"], 0.5 * 0.49, rtol=1e-5)  # head starts at zero
    for _ in range(10):
        state, m = step(state, cbatch, frozen)
    assert float(m["value_loss"]) < 0.5 * float(m0["value_loss"])
    # The composed critic is a full critic: critic_values runs on it unchanged.
    values = critic.critic_values(
        critic.compose_critic(frozen, state.params), CFG, batch["tokens"], batch["token_mask"]
    )
    assert values.shape == batch["tokens"].shape
