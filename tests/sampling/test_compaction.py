"""Batch compaction on a tiny random decoder: rows that stop leave the batch, the rest decode
on in smaller buckets, and every output (tokens, log-probs, stop reasons, the live cache) is
what the static batch gives."""

import dataclasses

import jax
import numpy as np
import pytest

from memjax.sampling import SamplingParams, continue_, sample
from memjax.sampling.compaction import batch_bucket, smaller_bucket
from memjax.sampling.sampling_params import compacts
from tests.sampling.tiny import tiny_model

PROMPTS = [[5, 9, 2, 33, 17], [7, 1], [11, 12, 13, 14, 15, 16], [40, 41, 42]]


@pytest.fixture(scope="module")
def model():
    return tiny_model(3)


def _spread_eos(free_tokens: np.ndarray) -> list[int]:
    """EOS ids meant to stop the rows of a free run at spread-out steps: row r's token at a
    depth growing with r (a row stops at the first of them it meets)."""
    rows, steps = free_tokens.shape
    depths = [1 + (r * (steps - 2)) // max(rows - 1, 1) for r in range(rows)]
    return [int(free_tokens[r, min(d, steps - 1)]) for r, d in enumerate(depths)]


def _both(params, cfg, sampling, key, **kw):
    static = sample(params, cfg, PROMPTS, _with(sampling, False), key, **kw)
    compact = sample(params, cfg, PROMPTS, _with(sampling, True), key, **kw)
    return static, compact


def _with(sampling, compaction):
    return dataclasses.replace(sampling, compaction=compaction, weight_dtype="stored")


def _assert_same(static, compact):
    np.testing.assert_array_equal(compact.tokens, static.tokens)
    np.testing.assert_array_equal(compact.lengths, static.lengths)
    assert compact.stop_reason == static.stop_reason
    np.testing.assert_allclose(compact.logprobs, static.logprobs, atol=1e-5)
    np.testing.assert_array_equal(
        np.asarray(compact.state.cache.valid), np.asarray(static.state.cache.valid)
    )
    np.testing.assert_array_equal(
        np.asarray(compact.state.pending), np.asarray(static.state.pending)
    )


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(max_new_tokens=24, greedy=True),
        SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=24),
    ],
    ids=["greedy", "seeded"],
)
def test_compacted_decode_is_token_identical_to_the_static_batch(model, sampling):
    params, cfg = model
    key = jax.random.key(4)
    free = sample(params, cfg, PROMPTS, _with(sampling, False), key, eos_ids=[], group_size=2)
    eos = _spread_eos(free.tokens)
    static, compact = _both(params, cfg, sampling, key, eos_ids=eos, group_size=2)
    assert len(set(static.lengths.tolist())) >= 3  # rows really stop at different steps
    _assert_same(static, compact)
    # The batch shrank through power-of-two buckets (a bounded set of compiled programs).
    sizes = compact.batch_sizes
    assert sizes[0] == 8 and len(sizes) >= 2 and static.batch_sizes == (8,)
    assert all(b < a and b == batch_bucket(b) for a, b in zip(sizes, sizes[1:]))

    # The rows that left early kept their cache: continuing equals continuing the static run.
    more = SamplingParams(max_new_tokens=5, greedy=True, weight_dtype="stored")
    chunks = [[3, 4]] * 8
    after_static = continue_(static.state, chunks, more, 0, eos_ids=())
    after_compact = continue_(compact.state, chunks, more, 0, eos_ids=())
    np.testing.assert_array_equal(after_compact.tokens, after_static.tokens)


def test_a_batch_of_one_and_an_all_stopped_batch(model):
    params, cfg = model
    sampling = SamplingParams(max_new_tokens=6, greedy=True, weight_dtype="stored", compaction=True)
    one = sample(params, cfg, PROMPTS[:1], sampling, 0, eos_ids=[])
    assert one.batch_sizes == (1,) and one.lengths.tolist() == [6]
    first = sample(params, cfg, PROMPTS, sampling, 0, eos_ids=[])
    stop_all = sorted(set(first.tokens[:, 0].tolist()))  # every row stops on its first token
    out = sample(params, cfg, PROMPTS, sampling, 0, eos_ids=stop_all)
    assert out.lengths.tolist() == [1] * 4 and out.stop_reason == ["eos"] * 4


def test_buckets():
    assert [batch_bucket(n) for n in (1, 2, 3, 5, 8, 9)] == [1, 2, 4, 8, 8, 16]
    assert [smaller_bucket(n) for n in (1, 2, 3, 8, 12, 32)] == [0, 1, 2, 4, 8, 16]
    assert smaller_bucket(2, minimum=2) == 0 and batch_bucket(1, minimum=2) == 2


def test_compaction_is_on_by_default_only_for_an_unsharded_cpu_batch(model):
    default = SamplingParams()
    assert compacts(default, "cpu", sharded=False)
    assert not compacts(default, "cpu", sharded=True)
    assert not compacts(default, "gpu", sharded=False) and not compacts(default, "tpu", False)
    off, on = SamplingParams(compaction=False), SamplingParams(compaction=True)
    assert not compacts(off, "cpu", False) and compacts(on, "gpu", False)
    assert not compacts(on, "gpu", sharded=True)  # a sharded batch never shrinks

    # Through the sampler: a default greedy call on this CPU shrinks its batch as rows stop.
    params, cfg = model
    greedy = SamplingParams(max_new_tokens=12, greedy=True, weight_dtype="stored")
    free = sample(params, cfg, PROMPTS, greedy, 0, eos_ids=[])
    out = sample(params, cfg, PROMPTS, greedy, 0, eos_ids=_spread_eos(free.tokens))
    assert jax.default_backend() == "cpu" and len(out.batch_sizes) >= 2, out.batch_sizes
