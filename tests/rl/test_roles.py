"""The trainer's parts on their own: which weights train (all, or LoRA adapters), the roles
built over that choice, and what each learner makes of a step's rewards."""

import jax
import numpy as np
import pytest

from memjax.models import decoder
from memjax.models.params import flatten_with_names, init_params
from memjax.rl import toy
from memjax.rl.learners import GrpoLearner, PpoLearner, learner_for
from memjax.rl.roles import Actor, ActorSettings, Critic, CriticSettings
from memjax.rl.run_config import AdvantageConfig, RLRunConfig
from memjax.rl.weights import critic_trainable
from memjax.training.trained_weights import FullWeights, LoraWeights, trained_weights
from tests.rl.test_lora_train_step import CFG  # a tiny decoder with rank-4 LoRA
from tests.rl.test_trainer import _config


@pytest.fixture(scope="module")
def base():
    return init_params(decoder.decoder_abstract(CFG), jax.random.key(0))


def _rows(seed=0, B=4, T=8):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, CFG.vocab_size, (B, T)).astype(np.int32)
    return tokens, np.ones((B, T), bool)


def _equal(a, b) -> bool:
    fa, fb = flatten_with_names(a), flatten_with_names(b)
    return fa.keys() == fb.keys() and all(np.array_equal(fa[k], fb[k]) for k in fa)


def test_lora_trains_adapters_whose_start_leaves_the_base_as_it_is(base):
    weights = trained_weights(base, CFG, lora=CFG.lora, seed=0)
    assert isinstance(weights, LoraWeights) and weights.lora_pointer["rank"] == 4
    adapters = weights.policy.initial
    assert set(adapters) == {"layers"}  # only adapters are in the trained tree
    # B starts at zero: the merged sampler weights are the base's, and the actor's log-probs
    # equal the reference's (the base with the adapters off).
    merged = weights.for_sampler(adapters)
    assert _equal({k: merged[k] for k in base}, base)
    rc = RLRunConfig.from_section(_config("grpo"))
    actor = Actor(weights.policy, CFG, ActorSettings.of(rc))
    tokens, mask = _rows()
    policy = actor.logprob_fn(weights.for_logprobs(adapters), tokens, mask)
    reference = actor.logprob_fn(weights.reference(), tokens, mask)
    np.testing.assert_array_equal(np.asarray(policy), np.asarray(reference))


def test_full_weights_train_every_weight_and_keep_a_frozen_reference(base):
    weights = trained_weights(base, CFG.replace(lora=None), lora=None, seed=0)
    assert isinstance(weights, FullWeights) and weights.lora_pointer is None
    assert weights.for_sampler(base) is base and weights.for_logprobs(base) is base
    ref = weights.reference()
    assert _equal(jax.tree.map(lambda x: x.astype(np.float32), ref), base)  # same values
    critic = critic_trainable(weights, None, seed=1)
    assert critic.frozen is None and set(critic.initial) == {"backbone", "head", "bias"}


def test_the_actor_reads_reference_logprobs_only_with_the_kl_term():
    cfg = toy.toy_decoder_config(_config("grpo").model)
    params = init_params(decoder.decoder_abstract(cfg), jax.random.key(0))
    for kl, has_ref in ((0.001, True), (0.0, False)):
        c = _config("grpo")
        c.loss.kl_coef = kl
        rc = RLRunConfig.from_section(c)
        actor = Actor(FullWeights(params, cfg).policy, cfg, ActorSettings.of(rc))
        assert ("ref_logp" in actor.fields) == has_ref
        assert {"tokens", "advantages", "old_logp"} <= set(actor.fields)


def test_a_lora_critic_trains_adapters_and_head_over_the_policys_base(base):
    weights = trained_weights(base, CFG, lora=CFG.lora, seed=0)
    trainable = critic_trainable(weights, None, seed=1)
    assert set(trainable.initial) == {"lora", "head", "bias"}
    assert trainable.frozen["embed"] is weights.reference()["embed"]  # one frozen copy
    rc = RLRunConfig.from_section(_config("ppo"))
    critic = Critic(trainable, CFG, CriticSettings.of(rc))
    tokens, mask = _rows()
    values = np.asarray(critic.values(critic.init_state().params, tokens, mask))
    np.testing.assert_array_equal(values, 0.0)  # the head starts at zero


def test_grpo_broadcasts_each_trajectorys_group_advantage_to_its_contexts():
    learner = GrpoLearner(AdvantageConfig(), group_size=2, old_logprobs="trainer")
    rewards = np.array([1.0, 0.0, 0.5, 0.5], np.float32)  # two groups of two
    row_traj = np.array([0, 0, 1, 2, 3, -1])  # trajectory 0 has two contexts; one padding row
    batch = {"loss_mask": np.ones((6, 3), bool)}
    learner.add_targets(batch, rewards, row_traj)
    adv = batch["advantages"][:, 0]
    assert adv[0] == adv[1] > 0 > adv[2]  # both contexts of the winner, against its partner
    np.testing.assert_array_equal(adv[3:], 0.0)  # a tied group and the padding row


def test_ppo_gives_the_reward_to_the_last_token_of_the_final_context():
    learner = PpoLearner(AdvantageConfig(gamma=1.0, lam=1.0, whiten=False))
    loss_mask = np.array([[0, 1, 1, 0], [0, 1, 1, 1]], bool)  # two contexts of trajectory 0
    batch = {"loss_mask": loss_mask}
    values = np.zeros((2, 4), np.float32)
    learner.add_targets(batch, np.array([2.0], np.float32), np.array([0, 0]), lambda b: values)
    # Zero values, gamma = lambda = 1: every trained token's return is the rewards after it.
    # The reward sits on the last context's last trained token only.
    np.testing.assert_array_equal(batch["returns"][1], [0.0, 2.0, 2.0, 2.0])
    np.testing.assert_array_equal(batch["returns"][0], [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(batch["advantages"], batch["returns"])


def test_the_learner_follows_the_algorithm():
    assert isinstance(learner_for(RLRunConfig.from_section(_config("ppo"))), PpoLearner)
    grpo = learner_for(RLRunConfig.from_section(_config("grpo", old_logprobs="sampler")))
    assert isinstance(grpo, GrpoLearner) and not grpo.uses_critic and not grpo.old_from_trainer
