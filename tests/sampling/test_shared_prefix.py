"""Prompts that open alike prefill their opening once: the same completions and log-probs as
prefilling every prompt whole, grouped or not, and a live state that continues as before."""

import dataclasses
import warnings

import jax
import numpy as np
import pytest

from memjax.models.shared_prefix import common_prefix_length
from memjax.sampling import SamplingParams, continue_, sample
from memjax.sampling.prefix import PREFIX_BLOCK, rest_length, shared_prefix_length
from tests.sampling.tiny import assert_same_draws, greedy_reference, tiny_model

RNG = np.random.default_rng(7)
OPENING = RNG.integers(0, 64, 300).tolist()  # "instructions": 2 whole blocks + 44 tokens
PROMPTS = [OPENING + RNG.integers(0, 64, n).tolist() for n in (5, 40, 230)]


@pytest.fixture(scope="module")
def model():
    return tiny_model(3)


def _both(model, prompts, sampling, key, **kw):
    """(shared, unshared) outputs of the same call."""
    params, cfg = model
    shared = sample(params, cfg, prompts, sampling, key, eos_ids=[], **kw)
    unshared = dataclasses.replace(sampling, shared_prefix=0)
    whole = sample(params, cfg, prompts, unshared, key, eos_ids=[], **kw)
    return shared, whole


def test_the_shared_length_is_whole_blocks_of_the_common_opening():
    assert common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert shared_prefix_length(PROMPTS, 256) == 2 * PREFIX_BLOCK
    assert shared_prefix_length(PROMPTS, 257) == 0  # under the minimum
    assert shared_prefix_length(PROMPTS, 0) == 0  # sharing off
    assert shared_prefix_length(PROMPTS[:1], 128) == 0  # one prompt: nothing to share
    # Identical prompts still leave each row its last token (whose logits start decoding).
    same = [OPENING[:256]] * 3
    assert shared_prefix_length(same, 128) == 128
    assert [rest_length(n) for n in (5, 100, 129, 596, 1100)] == [16, 128, 256, 640, 1152]


def test_greedy_completions_equal_whole_prefills_and_a_full_recompute(model):
    params, cfg = model
    sampling = SamplingParams(max_new_tokens=6, greedy=True, weight_dtype="stored")
    shared, whole = _both(model, PROMPTS, sampling, 0)
    np.testing.assert_array_equal(shared.tokens, whole.tokens)
    np.testing.assert_allclose(shared.logprobs, whole.logprobs, atol=1e-5)
    for i, prompt in enumerate(PROMPTS):
        assert shared.tokens[i].tolist() == greedy_reference(params, cfg, prompt, 6)
    # The cache holds the opening once per row plus the rests in whole blocks, not the
    # power-of-two bucket (1,024) the longest whole prompt (530 tokens) pads to.
    assert shared.state.cache.size < whole.state.cache.size


def test_sampled_groups_draw_the_same_tokens_as_whole_prefills(model):
    sampling = SamplingParams(temperature=0.8, top_k=20, max_new_tokens=10, weight_dtype="stored")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shared, whole = _both(model, PROMPTS, sampling, jax.random.key(4), group_size=3)
    # The opening's cache widens into the groups' rows: nothing to donate, nothing warned.
    assert not [w for w in caught if "donated" in str(w.message)]
    assert shared.tokens.shape == (9, 10)
    assert_same_draws(shared, whole)


def test_a_shared_prefill_continues_as_a_whole_one(model):
    sampling = SamplingParams(temperature=1.0, max_new_tokens=5, weight_dtype="stored")
    shared, whole = _both(model, PROMPTS, sampling, jax.random.key(1))
    chunks = [[40, 41], [42], [43, 44, 45]]
    after_shared = continue_(shared.state, chunks, sampling, jax.random.key(2))
    after_whole = continue_(whole.state, chunks, sampling, jax.random.key(2))
    np.testing.assert_array_equal(after_shared.tokens, after_whole.tokens)
    np.testing.assert_allclose(after_shared.logprobs, after_whole.logprobs, atol=1e-5)


def test_a_negative_minimum_is_refused():
    with pytest.raises(ValueError, match="shared_prefix=-1"):
        SamplingParams(shared_prefix=-1)
