"""bf16 weights in the sampler on the packaged SmolLM2: greedy decoding agrees with f32
wherever f32's choice is decided (top-2 logit margin > 0.05), and the sampler's log-probs stay
within LOGPROB_TOL of an f32 forward pass over the same tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.checkpoints import load_model
from memjax.models import decoder
from memjax.sampling import SamplingParams, prepare_params, sample
from memjax.sampling.weights import cast_matrices
from tools.bench_sampling import QUESTIONS

NEW = 32
MARGIN = 0.05
# Measured on these prompts: max |bf16 sampler - f32 forward| log-prob 0.04 nats, mean 0.004.
LOGPROB_TOL = 0.1
LOGPROB_MEAN_TOL = 0.02


def _forward_logprobs(params, cfg, rows: list[list[int]]) -> np.ndarray:
    """log_softmax of a full forward pass [B, W, V], rows right-padded (harmless: causal)."""
    width = -(-max(map(len, rows)) // 32) * 32
    tokens = jnp.asarray([r + [0] * (width - len(r)) for r in rows], jnp.int32)
    logits, _ = decoder.jit_forward(
        params, tokens, jnp.broadcast_to(jnp.arange(width), tokens.shape), cfg
    )
    return np.asarray(jax.nn.log_softmax(logits, axis=-1))


@pytest.mark.heavy
def test_bf16_weight_decode_agrees_with_f32_where_f32_is_decided():
    model = load_model("packaged:smollm2")
    cfg, tok = model.cfg, model.tokenizer
    prompts = [tok.chat([{"role": "user", "content": q}]) for q in QUESTIONS]
    sampling = SamplingParams(max_new_tokens=NEW, greedy=True, weight_dtype="stored")
    f32 = prepare_params(model.params, cfg)
    ref = sample(f32, cfg, prompts, sampling, 0, eos_ids=[])
    low = sample(cast_matrices(f32, jnp.bfloat16), cfg, prompts, sampling, 0, eos_ids=[])
    del f32

    # f32 and bf16 forward passes over each prompt + f32's greedy completion.
    rows = [p + ref.tokens[i].tolist() for i, p in enumerate(prompts)]
    f32_lp = _forward_logprobs(model.params, cfg, rows)
    bf16_lp = _forward_logprobs(cast_matrices(model.params, jnp.bfloat16), cfg, rows)
    compared, flips = 0, []
    for i, p in enumerate(prompts):
        at = np.arange(len(p) - 1, len(p) - 1 + NEW)  # the positions that predict the new tokens
        top2 = np.sort(f32_lp[i, at], axis=-1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]  # log-prob gap = logit gap
        decided = margin > MARGIN
        assert (f32_lp[i, at].argmax(-1) == ref.tokens[i]).all()  # the forward is f32's path
        # Teacher-forced on f32's path, bf16 picks f32's token at every decided position.
        agree = bf16_lp[i, at].argmax(-1) == ref.tokens[i]
        flips += [(i, int(t), float(margin[t])) for t in np.nonzero(~agree)[0]]
        # Free-running, bf16's own greedy path equals f32's up to its first undecided step.
        first_open = int(np.argmin(decided)) if not decided.all() else NEW
        same = low.tokens[i, :first_open] == ref.tokens[i, :first_open]
        compared += first_open if same.all() else int(np.argmin(same))
    print(f"bf16 vs f32: flips (row, step, f32 margin) {flips}; agreed steps {compared}")
    assert all(m <= MARGIN for _, _, m in flips), flips
    assert compared >= 0.75 * NEW * len(prompts)  # most rows are decided all the way
    # The sampler's bf16 log-probs against an f32 forward over bf16's own tokens.
    rows = [p + low.tokens[i].tolist() for i, p in enumerate(prompts)]
    f32_lp = _forward_logprobs(model.params, cfg, rows)
    gaps = []
    for i, p in enumerate(prompts):
        at = np.arange(len(p) - 1, len(p) - 1 + NEW)
        gaps.append(np.abs(low.logprobs[i] - f32_lp[i, at, low.tokens[i]]))
    gaps = np.concatenate(gaps)
    print(f"bf16 sampler vs f32 forward log-prob gap: max {gaps.max():.4f} mean {gaps.mean():.5f}")
    assert gaps.max() < LOGPROB_TOL and gaps.mean() < LOGPROB_MEAN_TOL
