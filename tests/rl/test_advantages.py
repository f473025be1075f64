"""Advantage estimators against hand-computed cases."""

import math

import numpy as np
import pytest

from memjax.rl import advantages as adv


def test_group_normalised_ddof_and_scalings():
    r = np.array([1, 0, 0, 1, 1, 1, 1, 1], np.float32)
    a = np.asarray(adv.group_advantages(r, 4, scaling="group", ddof=1, epsilon=0.0 + 1e-6))
    s = math.sqrt(1 / 3)  # std of [1,0,0,1] with ddof=1
    np.testing.assert_allclose(a[:4], [0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s], rtol=1e-5)
    np.testing.assert_allclose(a[4:], 0.0, atol=1e-6)  # constant group: no signal, no NaN
    a0 = np.asarray(adv.group_advantages(r, 4, scaling="group", ddof=0, epsilon=1e-9))
    np.testing.assert_allclose(a0[:4], [1, -1, -1, 1], rtol=1e-6)
    np.testing.assert_allclose(a0[4:], 0.0, atol=1e-6)
    an = np.asarray(adv.group_advantages(r, 4, scaling="none"))
    np.testing.assert_allclose(an, [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0], atol=1e-7)
    ab = np.asarray(adv.group_advantages(r, 4, scaling="batch", ddof=1, epsilon=0.0))
    batch_std = math.sqrt(1.5 / 7)  # std of all eight rewards, ddof=1
    np.testing.assert_allclose(ab[:4], np.array([0.5, -0.5, -0.5, 0.5]) / batch_std, rtol=1e-5)
    np.testing.assert_allclose(ab[4:], 0.0, atol=1e-7)


def test_group_epsilon_and_singleton_and_errors():
    a = adv.group_advantages(np.array([1.0, 0.0]), 2, ddof=0, epsilon=0.5)
    np.testing.assert_allclose(a, [0.5 / 1.0, -0.5 / 1.0], rtol=1e-6)  # std 0.5 + eps 0.5
    np.testing.assert_allclose(adv.group_advantages(np.array([3.0, 1.0]), 1), [0.0, 0.0])
    with pytest.raises(ValueError, match="groups of 3"):
        adv.group_advantages(np.zeros(4), 3)
    with pytest.raises(ValueError, match="scaling"):
        adv.group_advantages(np.zeros(4), 2, scaling="dr")


def test_multi_context_broadcast():
    traj = np.array([0.5, -1.0, 2.0], np.float32)
    ctx = np.array([0, 0, 1, 2, 2, 2])  # trajectory 0 had two contexts, trajectory 2 three
    rows = np.asarray(adv.broadcast_to_contexts(traj, ctx))
    np.testing.assert_allclose(rows, [0.5, 0.5, -1.0, 2.0, 2.0, 2.0])
    mask = np.array([[0, 1, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0], [1, 1, 1], [0, 1, 0]])
    tok = np.asarray(adv.token_advantages(rows, mask))
    np.testing.assert_allclose(tok, rows[:, None] * mask)


def test_gae_skips_masked_observation_tokens():
    # token 1 is a tool response: its value and reward must not enter the recursion.
    rewards = np.array([[0.0, 5.0, 0.0, 1.0]], np.float32)
    values = np.array([[0.5, 9.0, 0.2, 0.4]], np.float32)
    mask = np.array([[1, 0, 1, 1]])
    a, ret = adv.gae(rewards, values, mask, gamma=0.9, lam=0.8)
    a3 = 1.0 - 0.4
    a2 = (0.9 * 0.4 - 0.2) + 0.9 * 0.8 * a3
    a0 = (0.9 * 0.2 - 0.5) + 0.9 * 0.8 * a2
    np.testing.assert_allclose(np.asarray(a)[0], [a0, 0.0, a2, a3], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(ret)[0], [a0 + 0.5, 0.0, a2 + 0.2, a3 + 0.4], rtol=1e-5, atol=1e-7
    )
    # The same trajectory without the observation token gives the same advantages.
    a_short, _ = adv.gae(
        rewards[:, [0, 2, 3]], values[:, [0, 2, 3]], mask[:, [0, 2, 3]], gamma=0.9, lam=0.8
    )
    np.testing.assert_allclose(np.asarray(a_short)[0], [a0, a2, a3], rtol=1e-5)


def test_gae_trailing_padding_and_gamma_one():
    rewards = np.array([[0.0, 1.0, 0.0]], np.float32)
    values = np.array([[0.25, 0.5, 7.0]], np.float32)
    a, _ = adv.gae(rewards, values, np.array([[1, 1, 0]]), gamma=1.0, lam=1.0)
    # lam = gamma = 1: advantage = return-to-go - V
    np.testing.assert_allclose(np.asarray(a)[0], [0.75, 0.5, 0.0], rtol=1e-6)


def test_masked_whiten():
    x = np.array([[1.0, 2.0, 3.0, 100.0]], np.float32)
    m = np.array([[1, 1, 1, 0]])
    w = np.asarray(adv.masked_whiten(x, m, eps=0.0))
    np.testing.assert_allclose(w[0], [-1.0, 0.0, 1.0, 0.0], atol=1e-6)  # var ddof=1 of 1,2,3 is 1


def test_std_epsilon_and_singleton_groups_as_verl_and_trl():
    r = np.array([1.0, 0.0, 0.0, 0.0, 0.5, 0.5, 1.0, 0.0], np.float32)
    # verl compute_grpo_outcome_advantage (verl/trainer/ppo/core_algos.py), epsilon=1e-6,
    # torch float32: (r - mean) / (torch.std(group) + epsilon)
    verl = [1.4999970197677612, -0.4999989867210388, -0.4999989867210388, -0.4999989867210388,
            0.0, 0.0, 1.224741816520691, -1.224741816520691]  # fmt: skip
    np.testing.assert_allclose(adv.group_advantages(r, 4, epsilon=1e-6), verl, rtol=1e-6)
    # TRL GRPOTrainer (trl/trainer/grpo_trainer.py): (r - mean) / (std + 1e-4)
    trl = [1.4997000694274902, -0.4999000132083893, -0.4999000132083893, -0.4999000132083893,
           0.0, 0.0, 1.2244449853897095, -1.2244449853897095]  # fmt: skip
    np.testing.assert_allclose(adv.group_advantages(r, 4, epsilon=1e-4), trl, rtol=1e-6)
    # groups of one: verl takes mean 0, std 1 (the reward over 1 + epsilon); memjax's default 0
    x = np.array([3.0, 1.0], np.float32)
    np.testing.assert_allclose(
        adv.group_advantages(x, 1, singleton_group="verl"), [2.999997138977051, 0.9999990463256836]
    )
    np.testing.assert_allclose(
        adv.group_advantages(x, 1, scaling="none", singleton_group="verl"), [3.0, 1.0]
    )
    np.testing.assert_array_equal(adv.group_advantages(x, 1), [0.0, 0.0])
    with pytest.raises(ValueError, match="singleton_group"):
        adv.group_advantages(x, 1, singleton_group="trl")
