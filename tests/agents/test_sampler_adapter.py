"""The sampler adapter: ModelCall -> prompt ids (chat template + assistant prefix), stop strings,
EOS detection, and the sampled ids and log-probs kept; on SmolLM2's tokenizer and a tiny random
decoder over its vocabulary."""

import jax
import numpy as np
import pytest

from memjax.agents.episode import ModelCall
from memjax.agents.memsearcher import MemSearcherEpisode
from memjax.agents.sampler_adapter import (
    EOS,
    MAX_TOKENS,
    STOP_STRING,
    Sampled,
    SamplerPolicy,
    make_rollout_generate,
    prompt_ids,
    prompt_text,
    sampling_params,
    to_model_output,
)
from memjax.agents.search_r1 import SearchR1Episode
from memjax.sampling.sampler import sample
from memjax.sampling.sampling_params import SamplingParams
from tests.agents.conftest import tiny_decoder


@pytest.fixture(scope="module")
def tiny(smollm2_tokenizer):
    return tiny_decoder(smollm2_tokenizer.vocab_size, seed=1)


def test_prompt_is_chat_template_plus_assistant_prefix(smollm2_tokenizer):
    tok = smollm2_tokenizer
    call = MemSearcherEpisode("Who wrote Hamlet?", lambda s: len(s.split())).current_call()
    text = prompt_text(call, tok)
    assert text.endswith("<|im_start|>assistant\n<think>")
    assert text.startswith("<|im_start|>system\n")
    assert prompt_ids(call, tok) == tok.encode(text)


def test_model_output_from_sampled_ids(smollm2_tokenizer):
    tok = smollm2_tokenizer
    body = tok.encode("thinking</think>\n\\boxed{Paris}")
    eos = tok.eos_ids[0]
    out = to_model_output(Sampled((*body, eos), (-0.1,) * (len(body) + 1), EOS), tok.eos_ids, tok)
    assert out.text == "thinking</think>\n\\boxed{Paris}" and out.eos
    assert out.token_ids == (*body, eos)  # the EOS stays with the ids the trainer scores
    cut = to_model_output(Sampled(tuple(body), (0.0,) * len(body), MAX_TOKENS), tok.eos_ids, tok)
    assert not cut.eos and cut.text == "thinking</think>\n\\boxed{Paris}"
    stop = tok.encode("<search> Paris </search>")
    stopped = to_model_output(Sampled(tuple(stop), (0.0,) * len(stop), STOP_STRING), (eos,), tok)
    assert stopped.eos and stopped.text == "<search> Paris </search>"
    # Special tokens other than the final EOS are text the conversation keeps.
    odd = tok.encode("a") + [1]
    assert to_model_output(Sampled(tuple(odd), (0.0, 0.0), MAX_TOKENS), (eos,), tok).text == (
        "a<|im_start|>"
    )


def test_sampling_params_from_config_sections():
    greedy = sampling_params({"temperature": 0.0, "max_tokens_per_call": 7})
    assert greedy.greedy and greedy.temperature == 1.0 and greedy.max_new_tokens == 7
    sampled = sampling_params(
        {"temperature": 1.0, "top_p": 0.99, "top_k": 10000, "max_tokens_per_call": 9}
    )
    assert not sampled.greedy and (sampled.top_p, sampled.top_k) == (0.99, 10000)
    # The sampler's run options come from the same section; unset ones keep the defaults.
    assert (sampled.weight_dtype, sampled.compaction) == ("auto", None)  # None: by backend
    run = sampling_params(
        {
            "max_tokens_per_call": 9,
            "weight_dtype": "float32",
            "compaction": True,
            "context_overflow": "truncate_prompt",
        }
    )
    assert (run.weight_dtype, run.compaction, run.context_overflow) == (
        "float32",
        True,
        "truncate_prompt",
    )
    with pytest.raises(ValueError, match="weight_dtype='fp8'"):
        sampling_params({"max_tokens_per_call": 9, "weight_dtype": "fp8"})


def test_policy_renders_calls_groups_stops_and_keeps_logprobs(smollm2_tokenizer, tiny):
    tok = smollm2_tokenizer
    params, cfg = tiny
    sampling = SamplingParams(max_new_tokens=6, greedy=True)
    policy = SamplerPolicy(params, cfg, tok, sampling)
    calls = [
        MemSearcherEpisode("Who wrote Hamlet?", lambda s: 0).current_call(),
        SearchR1Episode("Who wrote Hamlet?").current_call(),  # stops on </search>, </answer>
    ]
    assert policy.stops(calls[1]) == ("</search>", "</answer>")
    assert policy.stops(calls[0]) == ("<|im_start|>",)  # MemSearcher's sampler stops there too
    outputs = policy(calls, jax.random.key(0))
    assert len(outputs) == len(policy.last_sampled) == 2
    for call, output, sampled in zip(calls, outputs, policy.last_sampled):
        # The same prompt sampled directly gives the same greedy ids: the adapter sent
        # exactly chat template + assistant prefix, and decoded what came back.
        direct = sample(
            params,
            cfg,
            [prompt_ids(call, tok)],
            sampling,
            jax.random.key(0),
            eos_ids=tok.eos_ids,
            stop_strings=policy.stops(call),
            tokenizer=tok,
        )
        ids = direct.completions()[0]
        assert list(sampled.tokens) == ids and output.token_ids == tuple(ids)
        assert output.text == tok.decode(
            ids[:-1] if ids[-1] in tok.eos_ids else ids, skip_special_tokens=False
        )
        np.testing.assert_allclose(sampled.logprobs, direct.logprobs[0, : len(ids)], atol=1e-5)
        assert all(lp <= 0 for lp in sampled.logprobs)
        assert output.eos == (sampled.stop_reason != MAX_TOKENS)


def test_policy_refuses_prompts_over_budget(smollm2_tokenizer, tiny):
    params, cfg = tiny
    policy = SamplerPolicy(
        params, cfg, smollm2_tokenizer, SamplingParams(max_new_tokens=2), max_prompt_tokens=50
    )
    call = ModelCall(({"role": "user", "content": "word " * 100},))
    (out,) = policy([call], jax.random.key(0))
    assert out.text == "" and not out.eos and policy.overflows == 1


def test_rollout_generate_returns_completions_with_logprobs(smollm2_tokenizer, tiny):
    tok = smollm2_tokenizer
    params, cfg = tiny
    generate = make_rollout_generate(cfg, tok, SamplingParams(max_new_tokens=5), stop=("</s>",))
    generate.params = params
    prompts = [tok.encode("Hello"), tok.encode("A longer prompt here")]
    out = generate(prompts, jax.random.key(3))
    assert len(out) == 2
    for c in out:
        assert 1 <= len(c.tokens) <= 5 and len(c.logprobs) == len(c.tokens)
        assert c.stop_reason in (EOS, STOP_STRING, MAX_TOKENS)
