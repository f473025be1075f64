"""The sampler end to end on a tiny random decoder: greedy and log-prob parity with full
recomputes, group sharing, continuation, EOS and stop strings, sharding."""

import jax
import numpy as np
import pytest

from memjax.parallel import make_mesh
from memjax.sampling import SamplingParams, continue_, sample
from tests.sampling.tiny import ToyTokenizer, greedy_reference, reference_logits, tiny_model

PROMPTS = [
    [5, 9, 2, 33, 17],
    [7, 1],
    [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27],
]


@pytest.fixture(scope="module")
def model():
    return tiny_model(3)


def _recomputed_logprobs(params, cfg, history, completion, temperature):
    """log_softmax(logits / T) at each completion token, from a forward pass over the row."""
    logits = reference_logits(params, cfg, history + completion)
    start = len(history) - 1
    lp = jax.nn.log_softmax(logits[start : start + len(completion)] / temperature, axis=-1)
    return np.asarray(lp)[np.arange(len(completion)), completion]


def _greedy(model, prompts, new_tokens: int):
    """Greedy samples of `prompts` with the stored weights and no stop tokens."""
    params, cfg = model
    sampling = SamplingParams(max_new_tokens=new_tokens, greedy=True, weight_dtype="stored")
    return sample(params, cfg, prompts, sampling, 0, eos_ids=[])


def test_greedy_equals_full_recompute(model):
    params, cfg = model
    out = _greedy(model, PROMPTS, 10)
    assert out.tokens.shape == (3, 10) and out.stop_reason == ["max_tokens"] * 3
    for i, prompt in enumerate(PROMPTS):
        assert out.tokens[i].tolist() == greedy_reference(params, cfg, prompt, 10)


def test_long_prompts_pad_to_quarter_octaves_and_decode_as_a_full_recompute(model):
    from memjax.sampling.padding import FINE_ABOVE, bucket_length

    for n in range(1, 5000):
        b = bucket_length(n)
        assert b >= max(n, 16)
        if n <= FINE_ABOVE:
            assert b & (b - 1) == 0  # powers of two, as before
        else:
            assert b % 256 == 0 and (b - n) < b / 5  # no bucket wastes a fifth
    assert len({bucket_length(n) for n in range(1025, 2049)}) == 4  # 4 programs per octave
    params, cfg = model
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, cfg.vocab_size, n).tolist() for n in (1100, 1030)]  # bucket 1280
    out = _greedy(model, prompts, 4)
    for i, prompt in enumerate(prompts):
        assert out.tokens[i].tolist() == greedy_reference(params, cfg, prompt, 4)


def test_logprobs_equal_a_forward_pass_and_groups_equal_separate_prefills(model):
    params, cfg = model
    sampling = SamplingParams(
        temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=12, weight_dtype="stored"
    )
    grouped = sample(params, cfg, PROMPTS, sampling, jax.random.key(5), eos_ids=[], group_size=3)
    assert grouped.tokens.shape == (9, 12)
    for r in range(9):
        prompt, completion = PROMPTS[r // 3], grouped.completions()[r]
        want = _recomputed_logprobs(params, cfg, prompt, completion, 0.7)
        np.testing.assert_allclose(grouped.logprobs[r], want, atol=1e-4)
    # A group's rows really differ (they share a prefill, not their draws).
    assert len({tuple(grouped.tokens[r]) for r in range(3)}) > 1

    separate_prompts = [p for p in PROMPTS for _ in range(3)]
    separate = sample(params, cfg, separate_prompts, sampling, jax.random.key(5), eos_ids=[])
    np.testing.assert_array_equal(grouped.tokens, separate.tokens)
    np.testing.assert_allclose(grouped.logprobs, separate.logprobs, atol=1e-5)


def test_continuation_equals_fresh_prefill_of_the_concatenation(model):
    params, cfg = model
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, weight_dtype="stored")
    first = sample(params, cfg, PROMPTS, sampling, jax.random.key(1), eos_ids=[], group_size=2)
    chunks = [[40, 41, 42], [43], [44, 45, 46, 47, 48], [49, 50], [51], [52, 53]]
    second = continue_(first.state, chunks, sampling, jax.random.key(2))
    third = continue_(second.state, [[1, 2]] * 6, sampling, jax.random.key(3))
    for out, step_key in ((second, 2), (third, 3)):
        histories = [h[: len(h) - n] for h, n in zip(out.state.history, out.lengths)]
        fresh = sample(params, cfg, histories, sampling, jax.random.key(step_key), eos_ids=[])
        np.testing.assert_array_equal(out.tokens, fresh.tokens)
        np.testing.assert_allclose(out.logprobs, fresh.logprobs, atol=1e-4)
    assert third.state.history[0] == PROMPTS[0] + first.completions()[0] + [40, 41, 42] + (
        second.completions()[0] + [1, 2] + third.completions()[0]
    )


def test_eos_stops_a_row_and_pads_after_it(model):
    params, cfg = model
    free = sample(
        params,
        cfg,
        PROMPTS,
        SamplingParams(max_new_tokens=10, greedy=True, weight_dtype="stored"),
        0,
        eos_ids=[],
    )
    eos = int(free.tokens[0, 3])
    first_hit = [int(np.argmax(row == eos)) if eos in row else None for row in free.tokens]
    out = sample(
        params,
        cfg,
        PROMPTS,
        SamplingParams(max_new_tokens=10, greedy=True, weight_dtype="stored"),
        0,
        eos_ids=[eos],
        pad_id=63,
    )
    for i, hit in enumerate(first_hit):
        if hit is None:
            assert out.stop_reason[i] == "max_tokens" and out.lengths[i] == 10
            np.testing.assert_array_equal(out.tokens[i], free.tokens[i])
        else:
            assert out.stop_reason[i] == "eos" and out.lengths[i] == hit + 1
            np.testing.assert_array_equal(out.tokens[i, : hit + 1], free.tokens[i, : hit + 1])
            assert (out.tokens[i, hit + 1 :] == 63).all() and (
                out.logprobs[i, hit + 1 :] == 0
            ).all()


def test_stop_strings_cut_exactly_at_the_string_and_continue_cleanly(model):
    params, cfg = model
    tok = ToyTokenizer(cfg.vocab_size)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=16, weight_dtype="stored")
    free = sample(params, cfg, PROMPTS, sampling, jax.random.key(7), eos_ids=[])
    texts = [tok.decode(r) for r in free.completions()]
    # Row 0's stop string straddles a token boundary (only the text check can find it); row 1's
    # is one whole token (the device stops on it).
    ends = np.cumsum([len(tok.pieces[t]) for t in free.tokens[0]])
    cut = int(ends[4])
    stops = (texts[0][cut - 2 : cut + 2], tok.pieces[int(free.tokens[1, 6])])
    out = sample(
        params,
        cfg,
        PROMPTS,
        sampling,
        jax.random.key(7),
        eos_ids=[],
        stop_strings=stops,
        tokenizer=tok,
    )
    for i in range(3):
        n = out.lengths[i]
        np.testing.assert_array_equal(out.tokens[i, :n], free.tokens[i, :n])
        text = tok.decode(out.tokens[i, :n])
        if any(s in texts[i] for s in stops):
            assert out.stop_reason[i] == "stop_string"
            assert any(s in text for s in stops)
            assert not any(s in tok.decode(out.tokens[i, : n - 1]) for s in stops)
        else:
            assert out.stop_reason[i] == "max_tokens" and n == 16
    assert out.stop_reason[:2] == ["stop_string", "stop_string"]

    # The dropped tokens are gone from the live cache: continuing equals a fresh prefill.
    greedy = SamplingParams(max_new_tokens=6, greedy=True, weight_dtype="stored")
    nxt = continue_(out.state, [[3, 4], [5], [6]], greedy, 0, stop_strings=())
    for i, h in enumerate(nxt.state.history):
        assert nxt.tokens[i].tolist() == greedy_reference(params, cfg, h[:-6], 6)


def test_sharded_sampling_equals_single_device(model):
    params, cfg = model
    mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    prompts = PROMPTS + [[3, 3, 3]]
    sampling = SamplingParams(temperature=1.0, top_p=0.95, max_new_tokens=8, weight_dtype="stored")
    single = sample(params, cfg, prompts, sampling, jax.random.key(9), eos_ids=[], group_size=2)
    sharded = sample(
        params, cfg, prompts, sampling, jax.random.key(9), eos_ids=[], group_size=2, mesh=mesh
    )
    np.testing.assert_array_equal(sharded.tokens, single.tokens)
    np.testing.assert_allclose(sharded.logprobs, single.logprobs, atol=1e-4)
    k = sharded.state.cache.k[0]
    assert len(k.sharding.device_set) == 8  # the cache really is spread over the mesh
