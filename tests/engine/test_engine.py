"""The engine against the lock-step sampler: the same tokens for the same requests, whatever
shares the slots, and a request it cannot hold refused before any work."""

import jax
import numpy as np
import pytest

from memjax.engine import Engine, Request, RequestError
from memjax.sampling.sampler import sample
from memjax.sampling.sampling_params import SamplingParams
from tests.sampling.tiny import ToyTokenizer, tiny_model

PARAMS, CFG = tiny_model(seed=1)
EOS = (5,)


def _prompts(n: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [
        rng.integers(6, CFG.vocab_size, size=int(rng.integers(3, 40))).tolist() for _ in range(n)
    ]


def _engine(slots: int, **kw) -> Engine:
    kw = {"max_len": 128, "prefill_chunk": 16, "window_block": 32, **kw}
    return Engine(PARAMS, CFG, eos_ids=EOS, slots=slots, **kw)


def test_greedy_equals_the_lock_step_sampler():
    prompts = _prompts(5)
    sp = SamplingParams(max_new_tokens=24, greedy=True)
    ref = sample(PARAMS, CFG, prompts, sp, 0, eos_ids=EOS)
    # Prompts up to 39 tokens in chunks of 16: every request is prefilled in 1-3 pieces, and
    # 2 slots serve 5 requests, so slots are refilled while others decode.
    engine = _engine(2)
    out = engine.run([Request(p, sp) for p in prompts])
    for i, c in enumerate(out):
        assert c.tokens == ref.completions()[i]
        np.testing.assert_allclose(c.logprobs, ref.logprobs[i, : len(c.tokens)], atol=1e-5)
        assert c.stop_reason == ref.stop_reason[i]
    assert engine.prefill_calls > 5  # chunked prompts
    assert not engine.busy and all(a is None for a in engine.active)


def test_sampled_rows_draw_as_the_sampler_rows_with_the_same_key():
    prompts = _prompts(4, seed=1)
    sp = SamplingParams(max_new_tokens=16, temperature=0.9, top_k=20, top_p=0.8)
    key = jax.random.key(7)
    ref = sample(PARAMS, CFG, prompts, sp, key, eos_ids=EOS)
    out = _engine(3).run([Request(p, sp, key=key, row=i) for i, p in enumerate(prompts)])
    for i, c in enumerate(out):
        assert c.tokens == ref.completions()[i]


def test_a_refilled_slot_gives_each_request_what_it_gets_alone():
    """Requests of mixed settings and lengths through 2 slots (each freed mid-decode and
    refilled from the queue) against each request alone in a 1-slot engine."""
    prompts = _prompts(6, seed=2)
    settings = [
        SamplingParams(max_new_tokens=n, temperature=t, top_p=p, greedy=g)
        for n, t, p, g in [
            (5, 1.0, 1.0, False),
            (30, 0.7, 0.9, False),
            (12, 1.0, 1.0, True),
            (3, 1.3, 0.5, False),
            (25, 1.0, 1.0, True),
            (9, 0.8, 1.0, False),
        ]
    ]
    requests = [
        Request(p, s, key=jax.random.key(i), row=i % 3)
        for i, (p, s) in enumerate(zip(prompts, settings))
    ]
    # One prompt chunk per step: a slot's prompt goes in between the other slot's decode calls.
    shared = _engine(2, steps_per_call=4, chunks_per_step=1).run(requests)
    alone_engine = _engine(1)
    for request, got in zip(requests, shared):
        (alone,) = alone_engine.run([request])
        assert got.tokens == alone.tokens
        np.testing.assert_allclose(got.logprobs, alone.logprobs, atol=1e-5)
        assert got.stop_reason == alone.stop_reason
        assert len(got.tokens) <= request.sampling.max_new_tokens


def test_stop_strings_cut_where_the_sampler_cuts():
    tok = ToyTokenizer(CFG.vocab_size)
    prompts = _prompts(4, seed=3)
    sp = SamplingParams(max_new_tokens=20, greedy=True)
    ref = sample(PARAMS, CFG, prompts, sp, 0, eos_ids=EOS, stop_strings=("ab",), tokenizer=tok)
    engine = _engine(2, tokenizer=tok)
    out = engine.run([Request(p, sp, stop_strings=("ab",)) for p in prompts])
    assert [c.tokens for c in out] == ref.completions()
    assert [c.stop_reason for c in out] == ref.stop_reason
    assert "stop_string" in ref.stop_reason  # the case is exercised


def test_a_request_longer_than_the_slots_is_refused_in_one_line():
    engine = _engine(2)
    with pytest.raises(RequestError) as err:
        engine.submit(Request(list(range(6, 60)) * 2, SamplingParams(max_new_tokens=40)))
    message = str(err.value)
    assert "\n" not in message
    assert "108 prompt tokens + max_new_tokens=40 needs 148 positions" in message
    assert "max_len=128" in message
    assert not engine.busy  # nothing was queued
    with pytest.raises(RequestError, match="at least one prompt token"):
        engine.submit(Request([], SamplingParams()))


def test_max_len_is_capped_by_the_model_window():
    engine = Engine(PARAMS, CFG.replace(max_position_embeddings=64), eos_ids=EOS, max_len=4096)
    assert engine.max_len == 64
    with pytest.raises(RequestError, match="max_len=64"):
        engine.submit(Request([7] * 60, SamplingParams(max_new_tokens=8)))


def test_prompts_that_open_alike_reuse_their_first_chunks_bit_for_bit():
    """Five prompts sharing a 40-token opening (two whole chunks of 16): from the second on,
    those chunks are copied, not computed, and every completion is what it was without."""
    opening = _prompts(1, seed=4)[0] + list(range(6, 40))
    prompts = [opening[:40] + p[:9] for p in _prompts(5, seed=5)]
    sp = SamplingParams(max_new_tokens=12, temperature=0.8)
    requests = [Request(p, sp, key=jax.random.key(2), row=i) for i, p in enumerate(prompts)]
    reusing, fresh = _engine(2), _engine(2, prefix_chunks=0)
    got, want = reusing.run(requests), fresh.run(requests)
    assert reusing.prefix.hits >= 2 * 3  # two chunks for each prompt after the first two
    assert fresh.prefix.hits == 0
    assert reusing.prefill_calls < fresh.prefill_calls
    for a, b in zip(got, want):
        assert a.tokens == b.tokens
        assert a.logprobs == b.logprobs  # copied values are the computed ones exactly
    ref = sample(PARAMS, CFG, prompts, sp, jax.random.key(2), eos_ids=EOS)
    assert [c.tokens for c in got] == ref.completions()
