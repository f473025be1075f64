"""Greedy chat completions of the packaged SmolLM2 equal transformers' generate, token for token."""

import numpy as np
import pytest
import torch

from memjax.checkpoints import load_model
from memjax.checkpoints.packaged import smollm2_gguf
from memjax.sampling import SamplingParams, generate_chat

QUESTIONS = [
    "What is the capital of France? Answer briefly.",
    "Write a haiku about memory.",
    "List three uses of a paperclip and explain each one in a sentence, please.",
]


@pytest.mark.heavy
def test_greedy_chat_matches_transformers_generate():
    from transformers import AutoModelForCausalLM

    model = load_model("packaged:smollm2")
    tok = model.tokenizer
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS]
    out = generate_chat(model, None, convs, SamplingParams(max_new_tokens=64, greedy=True), 0)
    prompts = [tok.chat(c) for c in convs]
    assert len({len(p) for p in prompts}) == 3  # different lengths: left padding is exercised

    path = smollm2_gguf()
    hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    # Reference: one prompt at a time (no padding on the transformers side at all).
    gen = []
    with torch.no_grad():
        for p in prompts:
            row = hf.eval().generate(
                input_ids=torch.tensor([p]),
                attention_mask=torch.ones(1, len(p), dtype=torch.long),
                max_new_tokens=64,
                do_sample=False,
                eos_token_id=list(tok.eos_ids),
                pad_token_id=tok.pad_id,
            )
            gen.append(row[0, len(p) :].numpy())
    for i in range(3):
        ours = out.output.completions()[i]
        np.testing.assert_array_equal(ours, gen[i])
        ended = ours[-1] in tok.eos_ids
        assert out.output.stop_reason[i] == ("eos" if ended else "max_tokens")
        assert out.texts[i] == tok.decode(ours)
    assert any(len(c) > 20 for c in out.output.completions())
