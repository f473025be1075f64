"""Loss formulas against hand-computed cases (both clip branches, dual clip, KLs, aggregation)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.rl import losses


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
    # clamps: k3 at delta=15 is ~3.3e6 -> 10; k1 of -1 with clamp 0.5 -> -0.5
    big = losses.kl_estimate(jnp.array([-16.0]), jnp.array([-1.0]), "k3", 10.0)
    np.testing.assert_allclose(big, [10.0])
    np.testing.assert_allclose(losses.kl_estimate(logp, ref, "k1", 0.5), [0.5, -0.5, 0.0])
    # the log-ratio is clamped to +-20 before exp: finite even for absurd gaps
    huge = losses.kl_estimate(jnp.array([-500.0]), jnp.array([0.0]), "k3", None)
    np.testing.assert_allclose(huge, [math.exp(20) - 21], rtol=1e-5)


def test_k3_plus_has_k3_value_and_k2_gradient():
    ref = jnp.array([-2.0, -0.5])
    logp = jnp.array([-1.0, -1.5])
    val = losses.kl_estimate(logp, ref, "k3+", None)
    np.testing.assert_allclose(val, losses.kl_estimate(logp, ref, "k3", None), rtol=1e-6)
    g = jax.grad(lambda lp: losses.kl_estimate(lp, ref, "k3+", None).sum())(logp)
    np.testing.assert_allclose(g, -(ref - logp), rtol=1e-6)  # d/dlogp of (ref-logp)^2/2


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


X = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [7, 0, 0, 0]], np.float32)
M = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])


@pytest.mark.parametrize(
    "mode,norm,total,den",
    [
        ("token-mean", None, 17.0, 5.0),
        ("seq-mean-token-mean", None, 2.0 + 5.5, 2.0),
        ("seq-mean-token-sum", None, 6.0 + 11.0, 2.0),
        ("seq-mean-token-sum-norm", None, 17.0 / 4, 2.0),
        ("seq-mean-token-sum-norm", 8.0, 17.0 / 8, 2.0),
    ],
)
def test_aggregation_modes_with_ragged_masks(mode, norm, total, den):
    x = X.copy()
    x[2, 3] = np.nan  # padding must not leak a NaN
    s, d = losses.aggregate(jnp.asarray(x), jnp.asarray(M), mode, norm)
    np.testing.assert_allclose([float(s), float(d)], [total, den], rtol=1e-6)
    # split into two micro-batches: sums add, and the denominator comes from the whole batch
    s1 = losses.aggregate_sum(jnp.asarray(x[:1]), jnp.asarray(M[:1]), mode, norm)
    s2 = losses.aggregate_sum(jnp.asarray(x[1:]), jnp.asarray(M[1:]), mode, norm)
    np.testing.assert_allclose(float(s1 + s2), total, rtol=1e-6)


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
