"""Tiny random `transformers` decoders saved with save_pretrained, and logits helpers."""

from __future__ import annotations

import numpy as np
import torch

TINY = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)

LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}

VARIANTS = {
    "qwen2_tied": ("qwen2", dict(tie_word_embeddings=True)),
    "qwen2_untied": ("qwen2", dict(tie_word_embeddings=False)),
    "llama": ("llama", dict(tie_word_embeddings=False)),
    "llama_rope_scaling": ("llama", dict(tie_word_embeddings=False, rope_scaling=LLAMA3_SCALING)),
}


def make_hf_model(variant: str, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    family, extra = VARIANTS[variant]
    torch.manual_seed(seed)
    if family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**TINY, **extra))
    else:
        model = LlamaForCausalLM(LlamaConfig(**TINY, **extra))
    # Random init leaves biases at zero; make them matter.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def hf_logits(model, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(tokens, dtype=torch.long),
            attention_mask=torch.tensor(mask.astype(np.int64)),
        )
    return out.logits.float().numpy()


def padded_batch(vocab: int, lengths: list[int], total: int, left: bool, seed: int = 0):
    """tokens [B, total], mask [B, total]: each row `length` real tokens, padded left or right."""
    rng = np.random.RandomState(seed)
    tokens = np.zeros((len(lengths), total), np.int32)
    mask = np.zeros((len(lengths), total), bool)
    for i, n in enumerate(lengths):
        sl = slice(total - n, total) if left else slice(0, n)
        tokens[i, sl] = rng.randint(1, vocab, n)
        mask[i, sl] = True
    return tokens, mask
