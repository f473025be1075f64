"""The papers' backbones by name, as their Hugging Face `config.json` fields.

Memory planning, launch specs and config validation need a model's shape before (or without)
its weights. These are the shape fields of the public `config.json` files of the instruct
checkpoints both papers train; loading real weights still reads the checkpoint's own file.

    cfg = presets.decoder_config("qwen2.5-7b-instruct", param_dtype="bfloat16")

Published parameter counts, which `tests/scale/test_presets.py` checks against
`param_count(decoder_abstract(cfg))`: Qwen2.5-3B 3.09B (tied embeddings), Qwen2.5-7B 7.62B,
Qwen2.5-14B 14.77B, Llama-3.1-8B 8.03B.
"""

from __future__ import annotations

from typing import Any

from memjax.models.config import DecoderConfig

_QWEN25 = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_act": "silu",
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
    "use_sliding_window": False,
}

HF_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2.5-3b-instruct": {
        **_QWEN25,
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "qwen2.5-7b-instruct": {
        **_QWEN25,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
    },
    "qwen2.5-14b-instruct": {
        **_QWEN25,
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    },
    "llama-3.1-8b-instruct": {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_act": "silu",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "max_position_embeddings": 131072,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
    },
}

# Directory names users pass as --config.model.source map onto presets (case-insensitive).
_ALIASES = {
    "qwen2.5-3b": "qwen2.5-3b-instruct",
    "qwen2.5-7b": "qwen2.5-7b-instruct",
    "qwen2.5-14b": "qwen2.5-14b-instruct",
    "llama-3.1-8b": "llama-3.1-8b-instruct",
    "meta-llama-3.1-8b-instruct": "llama-3.1-8b-instruct",
}


class UnknownPresetError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


def canonical_name(name: str) -> str:
    """'Qwen2.5-7B-Instruct', '/models/Qwen2.5-7B-Instruct', 'qwen2.5-7b' -> the preset key."""
    key = name.rstrip("/").rsplit("/", 1)[-1].lower()
    key = _ALIASES.get(key, key)
    if key not in HF_CONFIGS:
        raise UnknownPresetError(
            f"no model preset named {name!r}; presets: {', '.join(sorted(HF_CONFIGS))}"
        )
    return key


def hf_config(name: str) -> dict[str, Any]:
    return dict(HF_CONFIGS[canonical_name(name)])


def decoder_config(name: str, **overrides) -> DecoderConfig:
    """The DecoderConfig of a preset (dtype and remat as overrides)."""
    key = canonical_name(name)
    return DecoderConfig.from_hf_dict(HF_CONFIGS[key], source=f"preset {key}", **overrides)


__all__ = ["HF_CONFIGS", "UnknownPresetError", "canonical_name", "hf_config", "decoder_config"]
