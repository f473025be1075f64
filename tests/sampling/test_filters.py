"""temperature -> top-k -> top-p, against transformers' warpers and hand-computed cases, and
empirical frequencies against the filtered distribution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from memjax.sampling.filters import choose_tokens, filtered_logits, top_k_filter, top_p_filter
from memjax.sampling.sampling_params import SamplingParams


def _logits(rows=4, vocab=50, seed=0):
    return jax.random.normal(jax.random.key(seed), (rows, vocab)) * 3.0


def test_top_p_keeps_the_token_that_crosses_the_threshold():
    probs = jnp.asarray([[0.05, 0.5, 0.15, 0.3]])
    logits = jnp.log(probs)
    kept = np.isfinite(np.asarray(top_p_filter(logits, 0.7)))[0]
    # 0.5 alone is below 0.7, so 0.3 (which crosses it) is kept; 0.15 and 0.05 are not.
    assert kept.tolist() == [False, True, False, True]
    kept = np.isfinite(np.asarray(top_p_filter(logits, 0.81)))[0]
    assert kept.tolist() == [False, True, True, True]


@pytest.mark.parametrize("top_k,top_p", [(0, 0.8), (7, 1.0), (10, 0.6), (3, 0.95)])
def test_filters_match_transformers(top_k, top_p):
    logits = _logits()
    sampling = SamplingParams(temperature=0.7, top_k=top_k, top_p=top_p)
    ours = np.asarray(filtered_logits(logits, sampling))
    scores = torch.tensor(np.asarray(logits)) / 0.7
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    theirs = scores.numpy()
    np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(theirs))
    np.testing.assert_allclose(ours[np.isfinite(ours)], theirs[np.isfinite(theirs)], rtol=1e-6)


def test_top_p_one_and_top_k_zero_leave_the_distribution_untouched():
    logits = _logits()
    np.testing.assert_array_equal(top_k_filter(logits, 0), logits)
    np.testing.assert_array_equal(top_p_filter(logits, 1.0), logits)
    sampling = SamplingParams(temperature=0.5, top_k=0, top_p=1.0)
    np.testing.assert_allclose(filtered_logits(logits, sampling), logits / 0.5, rtol=1e-7)


def test_top_k_one_equals_greedy():
    logits = _logits(rows=64)
    greedy, greedy_lp = choose_tokens(logits, SamplingParams(greedy=True, temperature=0.8), None, 0)
    for step in range(5):
        sampled, lp = choose_tokens(
            logits, SamplingParams(top_k=1, temperature=0.8), jax.random.key(3), jnp.int32(step)
        )
        np.testing.assert_array_equal(sampled, greedy)
        np.testing.assert_allclose(lp, greedy_lp, rtol=1e-6)


def test_empirical_frequencies_match_the_filtered_distribution():
    """n = 40,000 draws (fixed seed) from one row's distribution after temperature 0.8, top-k 6,
    top-p 0.9. Tolerance: every token's frequency is within 5 standard errors
    (5 * sqrt(p (1 - p) / n), at most 0.0125) of its filtered probability, and tokens the filters
    remove are never drawn."""
    n = 40_000
    row = jnp.asarray([2.0, 1.5, 1.2, 1.0, 0.7, 0.5, 0.4, 0.3, -1.0, 0.9])
    sampling = SamplingParams(temperature=0.8, top_k=6, top_p=0.9)
    want = np.asarray(jax.nn.softmax(filtered_logits(row[None], sampling))[0], np.float64)
    assert 2 <= np.count_nonzero(want) < 6  # both filters are active on this row
    tokens, _ = choose_tokens(jnp.tile(row, (n, 1)), sampling, jax.random.key(0), jnp.int32(0))
    freq = np.bincount(np.asarray(tokens), minlength=row.shape[0]) / n
    tol = 5 * np.sqrt(want * (1 - want) / n)
    assert np.all(freq[want == 0] == 0)
    assert np.all(np.abs(freq - want) <= tol + 1e-12), (freq, want)
