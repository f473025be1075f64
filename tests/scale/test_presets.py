"""The papers' backbones by name: shapes that give the published parameter counts."""

import pytest

from memjax.models import presets
from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.params import param_count

PUBLISHED = {  # model cards: Qwen2.5 3.09B / 7.61B / 14.7B; Llama 3.1 8.03B
    "qwen2.5-3b-instruct": 3.09e9,
    "qwen2.5-7b-instruct": 7.62e9,
    "qwen2.5-14b-instruct": 14.77e9,
    "llama-3.1-8b-instruct": 8.03e9,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts(name):
    n = param_count(decoder_abstract(presets.decoder_config(name)))
    assert abs(n - PUBLISHED[name]) / PUBLISHED[name] < 0.003, n


def test_shapes_and_round_trip():
    q3 = presets.decoder_config("Qwen2.5-3B-Instruct")
    assert q3.tie_embeddings and q3.qkv_bias and (q3.num_heads, q3.num_kv_heads) == (16, 2)
    llama = presets.decoder_config("/models/Meta-Llama-3.1-8B-Instruct/")
    assert llama.rope_scaling.factor == 8.0 and not llama.qkv_bias and llama.rope_theta == 5e5
    q14 = presets.decoder_config("qwen2.5-14b", param_dtype="bfloat16", remat="full")
    assert (q14.num_layers, q14.num_kv_heads, q14.head_dim, q14.remat) == (48, 8, 128, "full")
    # The presets are what DecoderConfig writes back as config.json.
    for name in presets.HF_CONFIGS:
        cfg = presets.decoder_config(name)
        assert DecoderConfig.from_hf_dict(cfg.to_hf_dict()) == cfg


def test_unknown_preset_names_the_choices():
    with pytest.raises(presets.UnknownPresetError, match="qwen2.5-7b-instruct"):
        presets.decoder_config("qwen2.5-72b")
