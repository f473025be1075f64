"""bf16 weights in the sampler: which calls get them, what is cast, that the decode step reads
them as stored, and that the trainer's sampler-vs-trainer log-prob gap metric sees the
difference (the trainer recomputes log-probs from its own f32 weights)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.models import decoder
from memjax.models.kv_cache import init_cache
from memjax.rl import losses
from memjax.sampling import SamplingParams, sample
from memjax.sampling.weights import WeightCopies, cast_matrices, min_batch, resolve
from memjax.training.logprobs import sequence_logprobs
from tests.sampling.tiny import tiny_model

BF16 = jnp.dtype(jnp.bfloat16)
PROMPTS = [[5, 9, 2, 33, 17], [7, 1], [11, 12, 13, 14, 15, 16], [40, 41, 42]]


def test_auto_keeps_the_stored_weights_and_explicit_dtypes_are_used():
    auto = SamplingParams()
    assert resolve(auto, 1) is None and resolve(auto, 8) is None
    assert resolve(SamplingParams(weight_dtype="float32"), 8) == jnp.float32
    assert resolve(SamplingParams(weight_dtype="bfloat16"), 1) == BF16
    assert resolve(SamplingParams(weight_dtype="stored"), 8) is None


def test_only_matrices_are_cast_and_copies_are_made_once():
    params, cfg = tiny_model(0)
    low = cast_matrices(decoder.unstack_layers(params), BF16)
    assert low["embed"].dtype == BF16 and low["layers"][0]["gate"].dtype == BF16
    assert low["final_norm"].dtype == jnp.float32
    assert low["layers"][1]["attn_norm"].dtype == jnp.float32
    assert min_batch(low) == 2 and min_batch(params) == 1
    copies = WeightCopies(params)
    assert copies.for_call(SamplingParams(), 4) is params
    low = SamplingParams(weight_dtype="bfloat16")
    assert copies.for_call(low, 4) is copies.for_call(low, 8)
    assert copies.for_call(low, 4)["embed"].dtype == BF16


def test_a_decode_step_reads_bf16_weights_as_stored():
    """No weight matrix is converted to f32 inside the step (that would write an f32 copy of
    every weight per step); the activations are cast down instead."""
    params, cfg = tiny_model(0)
    low = cast_matrices(decoder.unstack_layers(params), BF16)
    shapes = {a.shape for a in jax.tree.leaves(low) if a.dtype == BF16}
    cache = init_cache(cfg, 2, 16, per_layer=True)
    step = lambda p, t, c: decoder.forward(p, t, t, cfg, cache=c)
    jaxpr = jax.make_jaxpr(step)(low, jnp.zeros((2, 1), jnp.int32), cache)
    upcasts = [
        e
        for e in jaxpr.jaxpr.eqns
        if e.primitive.name == "convert_element_type"
        and e.invars[0].aval.dtype == BF16
        and e.invars[0].aval.shape in shapes
    ]
    assert not upcasts
    logits, _ = step(low, jnp.zeros((2, 1), jnp.int32), cache)
    assert logits.dtype == jnp.float32


@pytest.fixture(scope="module")
def model():
    return tiny_model(3)


def _trainer_gap(params, cfg, out):
    """(|trainer f32 log-prob - sampler log-prob| per completion token, the policy loss's
    reported sampler_gap) for a sample of PROMPTS."""
    rows = [p + c for p, c in zip(PROMPTS, out.completions())]
    width = max(map(len, rows))
    tokens = np.zeros((len(rows), width), np.int32)
    token_mask = np.zeros((len(rows), width), bool)
    loss_mask = np.zeros((len(rows), width), np.float32)
    sampler_logp = np.zeros((len(rows), width), np.float32)
    for i, (p, row) in enumerate(zip(PROMPTS, rows)):
        tokens[i, : len(row)], token_mask[i, : len(row)] = row, True
        # Log-probs are token-aligned (position t scores token t given the tokens before it).
        loss_mask[i, len(p) : len(row)] = 1.0
        sampler_logp[i, len(p) : len(row)] = out.logprobs[i]
    logp, _ = jax.jit(lambda p, t, m: sequence_logprobs(p, cfg, t, m))(
        params, jnp.asarray(tokens), jnp.asarray(token_mask)
    )
    batch = {
        "loss_mask": jnp.asarray(loss_mask),
        "advantages": jnp.zeros_like(jnp.asarray(loss_mask)),
        "old_logp": logp,
        "sampler_logp": jnp.asarray(sampler_logp),
    }
    _, metrics = losses.policy_objective(logp, None, batch, losses.PolicyLossConfig())
    gap = np.abs(np.asarray(logp) - sampler_logp)[loss_mask > 0]
    return gap, float(metrics["sampler_gap"] / metrics["tokens"])


def test_the_sampler_gap_metric_reports_bf16_sampling(model):
    """The closeness of bf16 log-probs is measured on SmolLM2 (test_smollm2_bf16_weights);
    this tiny model's weights are scaled up for peaked logits, so its bf16 rounding moves
    log-probs by nats, which is what the metric must show."""
    params, cfg = model
    gaps = {}
    for dtype in ("stored", "bfloat16"):
        sampling = SamplingParams(temperature=1.0, max_new_tokens=10, weight_dtype=dtype)
        out = sample(params, cfg, PROMPTS, sampling, jax.random.key(2), eos_ids=[])
        gap, reported = _trainer_gap(params, cfg, out)
        np.testing.assert_allclose(reported, gap.mean(), rtol=1e-4, atol=1e-7)
        gaps[dtype] = gap.mean()
    assert out.state.params["embed"].dtype == BF16
    assert gaps["stored"] < 1e-4 < gaps["bfloat16"]


def test_the_rl_sampling_section_sets_the_run_options():
    from memjax.errors import ConfigError
    from memjax.training.sections import read_section

    section = {"max_new_tokens": 8, "weight_dtype": "float32", "compaction": True}
    sampling = read_section(SamplingParams, section, "config.sampling")
    assert (sampling.weight_dtype, sampling.compaction) == ("float32", True)
    with pytest.raises(ConfigError, match="config.sampling.context_overflow='cut'"):
        read_section(
            SamplingParams, {"max_new_tokens": 8, "context_overflow": "cut"}, "config.sampling"
        )
