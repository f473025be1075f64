"""Loss formulas against hand-computed cases (both clip branches, dual clip, KLs, aggregation)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.rl import losses
from memjax.training import aggregation


def _pg(ratio, a, **kw):
    logp = jnp.log(jnp.asarray(ratio, jnp.float32))
    loss, info = losses.clipped_policy_loss(
        logp, jnp.zeros_like(logp), jnp.asarray(a, jnp.float32), **kw
    )
    return np.asarray(loss), {k: np.asarray(v) for k, v in info.items()}


def test_clip_branches_positive_and_negative_advantages():
    ratio = [1.5, 0.5, 0.5, 1.5, 1.1]
    a = [1.0, 1.0, -1.0, -1.0, 2.0]
    loss, info = _pg(ratio, a, eps_low=0.2, eps_high=0.3)
    # A>0, r>1+eh: capped at -1.3; A>0, r<1: unclipped -0.5 (no floor for A>0)
    # A<0, r<1-el: clipped 0.8; A<0, r>1: unclipped 1.5; inside the band: -2*1.1
    np.testing.assert_allclose(loss, [-1.3, -0.5, 0.8, 1.5, -2.2], rtol=1e-6)
    np.testing.assert_array_equal(info["clipped"], [True, False, True, False, False])
    np.testing.assert_allclose(info["ratio"], ratio, rtol=1e-6)


def test_eps_high_defaults_to_eps_low():
    loss, _ = _pg([1.5], [1.0], eps_low=0.2)
    np.testing.assert_allclose(loss, [-1.2], rtol=1e-6)


def test_dual_clip_bounds_negative_advantages_only():
    loss, info = _pg([5.0, 2.0, 5.0], [-1.0, -1.0, 2.0], eps_low=0.2, dual_clip=3.0)
    # -A*r = 5 > 3 -> 3; 2 < 3 untouched; A>0 never dual-clipped: -2*1.2
    np.testing.assert_allclose(loss, [3.0, 2.0, -2.4], rtol=1e-6)
    np.testing.assert_array_equal(info["dual_clipped"], [True, False, False])
    loss_nodual, _ = _pg([5.0], [-1.0], eps_low=0.2)
    np.testing.assert_allclose(loss_nodual, [5.0], rtol=1e-6)
    with pytest.raises(ValueError, match="dual_clip"):
        losses.PolicyLossConfig(dual_clip=0.5)


def test_clip_gradient_is_zero_on_clipped_branch():
    def f(logp, a):
        return losses.clipped_policy_loss(logp, jnp.zeros(2), a, eps_low=0.2)[0].sum()

    g = jax.grad(f)(jnp.log(jnp.array([1.5, 0.9])), jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(np.asarray(g), [0.0, -0.9], rtol=1e-6)  # d(-A r)/dlogp = -A r


def test_kl_estimators_and_clamps():
    logp = jnp.array([-1.0, -2.0, -1.0])
    ref = jnp.array([-2.0, -1.0, -1.0])
    d = np.array([-1.0, 1.0, 0.0])  # ref - logp
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k1", None), -d, atol=1e-7)
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k2", None), 0.5 * d**2, atol=1e-7)
    k3 = np.exp(d) - d - 1
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k3", None), k3, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(k3[:2], [math.exp(-1), math.e - 2], rtol=1e-6)
    # an explicit clamp applies to any kind: k1 of -1 with clamp 0.5 -> -0.5
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k1", 0.5), [0.5, -0.5, 0.0])
    # the log-ratio is clamped to +-20 before exp: finite even for absurd gaps
    huge = losses.kl_estimate(jnp.array([-500.0]), jnp.array([0.0]), "k3", None)
    np.testing.assert_allclose(huge, [math.exp(20) - 21], rtol=1e-5)
    # verl's names for the same estimators
    for alias, kind in losses.KL_ALIASES.items():
        np.testing.assert_array_equal(
            losses.kl_estimate(logp, ref, alias), losses.kl_estimate(logp, ref, kind)
        )
    with pytest.raises(ValueError, match="kl_clamp"):
        losses.PolicyLossConfig(kl_clamp="trl")


# log(pi / pi_ref) around and beyond each clamp: k3 = 10 near logp - ref = -2.61 and 10.9995,
# k2 = 10 at |logp - ref| = 4.47, and -25 is past the +-20 clamp of k3's exponent.
KL_LOG_RATIOS = [-25.0, -5.0, -2.6, -2.62, 0.5, 4.0, 5.0, 10.9, 11.5]
K3_UNCLAMPED = [485165152.0, 142.4131622314453, 9.863737106323242, 10.115721702575684,
                0.10653066635131836, 3.0183157920837402, 4.00673770904541, 9.900017738342285,
                10.50001049041748]  # fmt: skip
K3_VERL = [10.0, 10.0, 9.863737106323242, 10.0, 0.10653066635131836, 3.0183157920837402,
           4.00673770904541, 9.900017738342285, 10.0]  # fmt: skip
K2_VALUE = [312.5, 12.5, 3.3799996376037598, 3.432199716567993, 0.125, 8.0, 12.5,
            59.40499496459961, 66.125]  # fmt: skip
K2_GRAD = [-25.0, -5.0, -2.5999999046325684, -2.619999885559082, 0.5, 4.0, 5.0,
           10.899999618530273, 11.5]  # fmt: skip

# Golden values: verl verl/trainer/ppo/core_algos.py kl_penalty(logprob, ref_logprob, kind)
# (v0.5, with kl_penalty_forward) run in torch float32 at ref_logprob = -1, value and
# d/dlogprob by autograd. "none" is kl_penalty_forward's k3 without its final clamp; "10" is
# torch.clamp(kl_penalty_forward(...), -10, 10) for k1 and k2, which verl never clamps.
KL_GOLDEN = [
    ("k1", "verl", KL_LOG_RATIOS, [1.0] * 9),
    ("k1", None, KL_LOG_RATIOS, [1.0] * 9),
    ("k1", 10.0, [-10.0, -5.0, -2.6, -2.62, 0.5, 4.0, 5.0, 10.0, 10.0],
     [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0]),
    ("k2", "verl", K2_VALUE, K2_GRAD),
    ("k2", None, K2_VALUE, K2_GRAD),
    ("k2", 10.0, [10.0, 10.0, 3.3799996376037598, 3.432199716567993, 0.125, 8.0, 10.0, 10.0, 10.0],
     [0.0, 0.0, -2.5999999046325684, -2.619999885559082, 0.5, 4.0, 0.0, 0.0, 0.0]),
    ("k3", "verl", K3_VERL,
     [0.0, 0.0, -12.463736534118652, 0.0, 0.39346933364868164, 0.9816843867301941,
      0.9932620525360107, 0.9999815225601196, 0.0]),
    ("k3", 10.0, K3_VERL,
     [0.0, 0.0, -12.463736534118652, 0.0, 0.39346933364868164, 0.9816843867301941,
      0.9932620525360107, 0.9999815225601196, 0.0]),
    ("k3", None, K3_UNCLAMPED,
     [0.0, -147.4131622314453, -12.463736534118652, -12.735721588134766, 0.39346933364868164,
      0.9816843867301941, 0.9932620525360107, 0.9999815225601196, 0.9999898672103882]),
    # k3+: k2 - sg(k2) + sg(clamped k3) keeps k2's gradient even where k3 is clamped
    ("k3+", "verl", K3_VERL, K2_GRAD),
    ("k3+", None, K3_UNCLAMPED, K2_GRAD),
]  # fmt: skip


@pytest.mark.parametrize("kind,clamp,value,grad", KL_GOLDEN)
def test_kl_estimators_value_and_gradient_match_verl(kind, clamp, value, grad):
    ref = jnp.full((len(KL_LOG_RATIOS),), -1.0)
    logp = ref + jnp.array(KL_LOG_RATIOS)
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, kind, clamp), value, rtol=2e-6)
    g = jax.grad(lambda lp: losses.kl_estimate(lp, ref, kind, clamp).sum())(logp)
    np.testing.assert_allclose(g, grad, rtol=2e-6, atol=1e-7)


def test_kl_clamp_default_is_verls_per_estimator():
    assert losses.PolicyLossConfig().kl_clamp == "verl"
    ref = jnp.zeros(2)
    logp = jnp.array([-30.0, 30.0])  # far outside every clamp
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k1"), [-30.0, 30.0])
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k2"), [450.0, 450.0])
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k3"), [10.0, 10.0])
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k3+"), [10.0, 10.0])


def test_value_loss_clipped():
    v = jnp.array([1.0, 0.0, 0.5])
    old = jnp.array([0.5, 0.5, 0.5])
    ret = jnp.array([0.0, 1.0, 0.6])
    loss, clipped = losses.value_loss(v, old, ret, clip=0.2)
    # v=1 clipped to 0.7: max(1, 0.49)/2; v=0 clipped to 0.3: max(1, 0.49)/2; inside: 0.01/2
    np.testing.assert_allclose(loss, [0.5, 0.5, 0.005], rtol=1e-5)
    np.testing.assert_array_equal(clipped, [False, False, False])
    loss2, clipped2 = losses.value_loss(jnp.array([1.0]), jnp.array([0.5]), jnp.array([2.0]), 0.2)
    np.testing.assert_allclose(loss2, [0.5 * 1.3**2], rtol=1e-6)  # clip to 0.7 is further away
    assert bool(clipped2[0])


def test_value_clip_fraction_counts_only_values_outside_the_band():
    # Golden: verl compute_value_loss (verl/trainer/ppo/core_algos.py), torch float32, c = 0.5:
    # per-token 0.5 * max(l1, l2) and vf_clipfrac = mean(l2 > l1). The first three tokens lie
    # inside the band, where V_old + clip(V - V_old) rounds away from V and looks "clipped".
    v = [0.1659611612558365, 0.22938452661037445, -0.03376535698771477, 1.2, -0.9, 1.3, 0.4, -0.2]
    old = [-0.3163001537322998, 0.6960427165031433, -0.4743329882621765, 0.5, 0.0, 0.5, 0.3, 0.0]
    ret = [0.4511854350566864, 0.10228229314088821, -0.2750387489795685, 0.0, -2.0, 2.0, 0.35, 0.1]
    loss, clipped = losses.value_loss(jnp.array(v), jnp.array(old), jnp.array(ret), clip=0.5)
    expected = [0.04067643731832504, 0.008077488280832767, 0.029106423258781433, 0.7200000286102295,
                1.125, 0.5, 0.001250000554136932, 0.04500000178813934]  # fmt: skip
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    np.testing.assert_array_equal(clipped, [False, False, False, False, True, True, False, False])
    assert float(np.mean(clipped)) == 0.25  # verl's vf_clipfrac; the rounded form gave 0.625


X = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [7, 0, 0, 0]], np.float32)
M = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    "mode,norm,total,den",
    [
        ("token-mean", None, 17.0, 5.0),
        ("seq-mean-token-mean", None, 2.0 + 5.5, 2.0),
        ("seq-mean-token-sum", None, 6.0 + 11.0, 2.0),
        ("seq-mean-token-sum-norm", 8.0, 17.0 / 8, 2.0),
    ],
)
def test_aggregation_modes_with_ragged_masks(mode, norm, total, den):
    x = X.copy()
    x[2, 3] = np.nan  # padding must not leak a NaN
    s, d = aggregation.aggregate(jnp.asarray(x), jnp.asarray(M), mode, norm)
    np.testing.assert_allclose([float(s), float(d)], [total, den], rtol=1e-6)
    # split into two micro-batches: sums add, and the denominator comes from the whole batch
    s1 = aggregation.aggregate_sum(jnp.asarray(x[:1]), jnp.asarray(M[:1]), mode, norm)
    s2 = aggregation.aggregate_sum(jnp.asarray(x[1:]), jnp.asarray(M[1:]), mode, norm)
    np.testing.assert_allclose(float(s1 + s2), total, rtol=1e-6)


def test_dr_grpo_normaliser_is_the_response_budget_on_ragged_rows():
    # Rows of T = 10 (prompt + response); responses of 3, 1, 5 and 0 tokens, budget 6.
    resp = [[0.5, -1.0, 2.0], [1.5], [0.25, 0.25, -0.5, 1.0, 3.0], []]
    prompt = [4, 2, 3, 5]
    x = np.full((4, 10), np.nan, np.float32)
    loss_mask = np.zeros((4, 10), np.int32)
    for i, (p, r) in enumerate(zip(prompt, resp)):
        x[i, p : p + len(r)] = r
        loss_mask[i, p : p + len(r)] = 1
    token_mask = np.zeros((5, 10), np.int32)
    token_mask[:4, :9] = 1  # a fifth, all-padding row fills the batch to the mesh
    x, loss_mask = (
        np.concatenate([x, np.zeros((1, 10), np.float32)]),
        np.concatenate([loss_mask, np.zeros((1, 10), np.int32)]),
    )
    mode = "seq-mean-token-sum-norm"
    s, d = aggregation.aggregate(jnp.asarray(x), jnp.asarray(loss_mask), mode, 6, empty_rows="skip")
    # verl agg_loss(seq-mean-token-sum-norm, loss_scale_factor=6), global_batch_size unset
    np.testing.assert_allclose(float(s / d), 0.3888888657093048, rtol=1e-6)
    s, d = aggregation.aggregate(
        jnp.asarray(x), jnp.asarray(loss_mask), mode, 6, empty_rows="count", token_mask=token_mask
    )
    # TRL GRPOTrainer._compute_loss, loss_type="dr_grpo", max_completion_length=6
    np.testing.assert_allclose(float(s / d), 0.2916666567325592, rtol=1e-6)
    with pytest.raises(ValueError, match="loss_scale_factor"):
        losses.PolicyLossConfig(agg_mode=mode)
    with pytest.raises(ValueError, match="response budget"):
        aggregation.aggregate_sum(jnp.asarray(x), jnp.asarray(loss_mask), mode)
    cfg = losses.PolicyLossConfig(agg_mode=mode, loss_scale_factor=6)
    assert cfg.loss_scale_factor == 6


def test_policy_objective_combines_terms():
    cfg = losses.PolicyLossConfig(kl_coef=0.5, kl_kind="k1", kl_clamp=None, entropy_coef=0.1)
    logp = jnp.log(jnp.array([[1.1, 1.0, 0.7]]))
    batch = {
        "loss_mask": jnp.array([[1, 1, 0]]),
        "old_logp": jnp.zeros((1, 3)),
        "advantages": jnp.array([[1.0, -2.0, 3.0]]),
        "ref_logp": jnp.zeros((1, 3)),
    }
    ent = jnp.array([[2.0, 4.0, 100.0]])
    total, m = losses.policy_objective(logp, ent, batch, cfg)
    pg = -1.1 + 2.0
    kl = math.log(1.1)
    np.testing.assert_allclose(float(total), pg + 0.5 * kl - 0.1 * 6.0, rtol=1e-5)
    np.testing.assert_allclose(float(m["pg_loss"]), pg, rtol=1e-5)
    assert float(m["tokens"]) == 2.0
    np.testing.assert_allclose(float(m["ratio_max"]), 1.1, rtol=1e-6)
    np.testing.assert_allclose(float(m["ratio_min"]), 1.0, rtol=1e-6)


@pytest.mark.parametrize("field", ["kl_coef", "entropy_coef", "eps_low", "eps_high"])
def test_a_negative_coefficient_or_clip_range_is_refused(field):
    # A negative KL or entropy coefficient rewards what it should penalise.
    with pytest.raises(ValueError, match=f"loss.{field}=-0.1: must be >= 0"):
        losses.PolicyLossConfig(**{field: -0.1})
    losses.PolicyLossConfig(**{field: 0.0})  # zero is off, and allowed
