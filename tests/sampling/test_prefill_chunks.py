"""A prefill in column chunks: the same completions and log-probs as one piece (greedy and
sampled, grouped, after a shared opening, in a continuation), chunks cut from the right."""

import dataclasses

import jax
import numpy as np
import pytest

from memjax.sampling import SamplingParams, continue_, sample
from memjax.sampling.chunk import column_chunks
from memjax.sampling.sampling_params import PREFILL_CHUNK_CPU, prefill_chunk, run_options
from tests.sampling.tiny import assert_same_draws, greedy_reference, tiny_model

RNG = np.random.default_rng(11)
# Lengths 3..150: the short rows are all padding in the first chunks of a 16-token split.
PROMPTS = [RNG.integers(0, 64, n).tolist() for n in (3, 37, 150)]
OPENING = RNG.integers(0, 64, 260).tolist()  # 2 whole shared blocks + 4 tokens


@pytest.fixture(scope="module")
def model():
    return tiny_model(5)


def _chunked_and_whole(model, prompts, sampling, key, chunk=16, **kw):
    params, cfg = model
    chunked = sample(
        params, cfg, prompts, dataclasses.replace(sampling, prefill_chunk=chunk), key, **kw
    )
    whole = sample(params, cfg, prompts, dataclasses.replace(sampling, prefill_chunk=0), key, **kw)
    return chunked, whole


def test_chunks_are_cut_from_the_right_and_chosen_by_backend_unless_set():
    assert column_chunks(100, 0) == [slice(0, 100)]
    assert column_chunks(100, 128) == [slice(0, 100)]
    assert column_chunks(256, 128) == [slice(0, 128), slice(128, 256)]
    pieces = column_chunks(300, 128)
    assert pieces == [slice(0, 44), slice(44, 172), slice(172, 300)]
    assert sum(p.stop - p.start for p in pieces) == 300
    with pytest.raises(ValueError, match="prefill_chunk=-1"):
        SamplingParams(prefill_chunk=-1)
    assert run_options({"prefill_chunk": "512"}) == {"prefill_chunk": 512}
    assert prefill_chunk(SamplingParams(), "cpu") == PREFILL_CHUNK_CPU
    assert prefill_chunk(SamplingParams(), "gpu") == 0
    assert prefill_chunk(SamplingParams(prefill_chunk=0), "cpu") == 0
    assert prefill_chunk(SamplingParams(prefill_chunk=64), "tpu") == 64


def test_greedy_completions_equal_one_piece_and_a_full_recompute(model):
    params, cfg = model
    sampling = SamplingParams(max_new_tokens=6, greedy=True, weight_dtype="stored")
    chunked, whole = _chunked_and_whole(model, PROMPTS, sampling, 0, eos_ids=[])
    np.testing.assert_array_equal(chunked.tokens, whole.tokens)
    np.testing.assert_allclose(chunked.logprobs, whole.logprobs, atol=1e-5)
    for i, prompt in enumerate(PROMPTS):
        assert chunked.tokens[i].tolist() == greedy_reference(params, cfg, prompt, 6)
    assert chunked.state.cache.size == whole.state.cache.size


@pytest.mark.parametrize("opening", [OPENING, []], ids=["shared_opening", "no_opening"])
def test_sampled_groups_draw_the_same_tokens(model, opening):
    prompts = [opening + p for p in PROMPTS]
    sampling = SamplingParams(
        temperature=0.9, top_k=20, max_new_tokens=8, weight_dtype="stored", shared_prefix=128
    )
    chunked, whole = _chunked_and_whole(
        model, prompts, sampling, jax.random.key(3), eos_ids=[], group_size=2
    )
    assert chunked.tokens.shape == (6, 8)
    assert_same_draws(chunked, whole)


def test_a_chunked_continuation_continues_as_one_piece(model):
    sampling = SamplingParams(temperature=1.0, max_new_tokens=5, weight_dtype="stored")
    chunked, whole = _chunked_and_whole(model, PROMPTS, sampling, jax.random.key(8), eos_ids=[])
    tool_outputs = [RNG.integers(0, 64, n).tolist() for n in (40, 2, 19)]
    key = jax.random.key(9)
    after_chunked = continue_(
        chunked.state, tool_outputs, dataclasses.replace(sampling, prefill_chunk=16), key
    )
    after_whole = continue_(
        whole.state, tool_outputs, dataclasses.replace(sampling, prefill_chunk=0), key
    )
    assert_same_draws(after_chunked, after_whole)


def test_a_long_prompt_on_the_cpu_is_prefilled_in_default_chunks(model, monkeypatch):
    from memjax.sampling import loop

    widths = []
    for name in ("prefill_new", "prefill"):
        real = getattr(loop, name)

        def recording(params, tokens, *args, _real=real, **kw):
            widths.append(tokens.shape[1])
            return _real(params, tokens, *args, **kw)

        monkeypatch.setattr(loop, name, recording)
    params, cfg = model
    prompt = RNG.integers(0, 64, 600).tolist()  # padded to the 1,024 bucket
    out = sample(
        params, cfg, [prompt], SamplingParams(max_new_tokens=3, greedy=True), 0, eos_ids=[]
    )
    assert widths == [PREFILL_CHUNK_CPU] * (1024 // PREFILL_CHUNK_CPU)
    assert out.tokens[0].tolist() == greedy_reference(params, cfg, prompt, 3)
