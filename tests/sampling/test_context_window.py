"""The sampler keeps every row inside the model's context window: an error naming the sizes,
or left truncation of the prompt when SamplingParams asks for it."""

import numpy as np
import pytest

from memjax.sampling import SamplingParams, continue_, sample
from memjax.sampling.context import ContextWindowError
from tests.sampling.tiny import CFG, tiny_model

WINDOW = 32
LONG = list(range(1, 21))  # 20 tokens


@pytest.fixture(scope="module")
def model():
    params, _ = tiny_model(3)
    return params, CFG.replace(max_position_embeddings=WINDOW)


def _greedy(n, **kw):
    return SamplingParams(max_new_tokens=n, greedy=True, weight_dtype="stored", **kw)


def test_prompt_plus_budget_beyond_the_window_is_an_error_naming_the_sizes(model):
    params, cfg = model
    with pytest.raises(ContextWindowError) as err:
        sample(params, cfg, [[5, 6], LONG], _greedy(13), 0, eos_ids=[])
    msg = str(err.value)
    assert "prompt 1 has 20 tokens" in msg and "max_new_tokens=13" in msg
    assert "33 positions" in msg and "max_position_embeddings=32" in msg
    with pytest.raises(ContextWindowError, match="leaves no room"):
        sample(params, cfg, [[5]], _greedy(32, context_overflow="truncate_prompt"), 0, eos_ids=[])


def test_exactly_full_window_is_allowed(model):
    params, cfg = model
    out = sample(params, cfg, [LONG], _greedy(12), 0, eos_ids=[])  # 20 + 12 = 32
    assert out.lengths.tolist() == [12]


def test_truncation_keeps_the_latest_tokens_and_equals_sampling_them(model):
    params, cfg = model
    sampling = _greedy(16, context_overflow="truncate_prompt")
    out = sample(params, cfg, [LONG, [7, 8]], sampling, 0, eos_ids=[])
    kept = LONG[-16:]  # 32 - 16 positions for the prompt
    assert out.state.history[0][:16] == kept and out.state.history[1][:2] == [7, 8]
    direct = sample(params, cfg, [kept, [7, 8]], _greedy(16), 0, eos_ids=[])
    np.testing.assert_array_equal(out.tokens, direct.tokens)


def test_a_continuation_past_the_window_is_an_error(model):
    params, cfg = model
    first = sample(params, cfg, [[5, 6, 7]], _greedy(10), 0, eos_ids=[])
    # The pending token sits at position 12; a 4-token chunk puts the next token at 17.
    with pytest.raises(ContextWindowError, match="row 0 continues at position 17"):
        continue_(first.state, [[1, 2, 3, 4]], _greedy(16), 0)
    ok = continue_(first.state, [[1, 2, 3, 4]], _greedy(15), 0)
    assert ok.lengths.tolist() == [15]
