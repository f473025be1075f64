"""LoRA on the decoder: exact base at B = 0, merged export and PEFT layout against transformers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from transformers import AutoModelForCausalLM

from memjax.checkpoints.decoder_io import CheckpointError, load_hf_decoder
from memjax.checkpoints.lora_io import (
    export_merged_hf,
    export_peft_adapters,
    load_peft_adapters,
)
from memjax.models import decoder, lora
from memjax.models.lora_config import LoraConfig, lora_config_from
from memjax.models.params import init_params
from tests.models.hf_fixtures import hf_logits, make_hf_model, padded_batch

TOL = 1e-4


def _logits(params, cfg, tokens, mask):
    positions = decoder.positions_from_mask(jnp.asarray(mask))
    out, _ = decoder.jit_forward(
        params, jnp.asarray(tokens), positions, cfg, token_mask=jnp.asarray(mask)
    )
    return np.asarray(out)


def _trained_adapters(cfg, seed=0):
    """Adapters as after some training: A as initialised, B random (B = 0 would test nothing)."""
    adapters = init_params(lora.lora_abstract(cfg), jax.random.key(seed))
    keys = iter(jax.random.split(jax.random.key(seed + 1), 16))
    for pair in adapters["layers"].values():
        pair["b"] = 0.05 * jax.random.normal(next(keys), pair["b"].shape, pair["b"].dtype)
    return adapters


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Qwen2 (q/k/v biases, untied head) saved with save_pretrained, loaded with LoRA."""
    path = tmp_path_factory.mktemp("qwen2")
    model = make_hf_model("qwen2_untied", seed=2)
    model.save_pretrained(path)
    base, cfg = load_hf_decoder(path, lora=LoraConfig(rank=4, alpha=12.0))
    return model, path, base, cfg


def test_zero_b_gives_the_base_logits_exactly(tiny):
    _, _, base, cfg = tiny
    adapters = init_params(lora.lora_abstract(cfg), jax.random.key(0))
    assert all(np.abs(np.asarray(p["a"])).max() > 0 for p in adapters["layers"].values())
    tokens, mask = padded_batch(cfg.vocab_size, [20, 9], 20, left=True)
    with_lora = _logits(lora.with_adapters(base, adapters), cfg, tokens, mask)
    np.testing.assert_array_equal(with_lora, _logits(base, cfg, tokens, mask))


def test_merged_export_reloads_in_transformers_with_the_adapted_logits(tiny, tmp_path):
    hf_base, _, base, cfg = tiny
    adapters = _trained_adapters(cfg)
    tokens, mask = padded_batch(cfg.vocab_size, [24, 11], 24, left=True, seed=1)
    ours = _logits(lora.with_adapters(base, adapters), cfg, tokens, mask)
    assert np.abs(ours - hf_logits(hf_base, tokens, mask))[mask].max() > 1e-2  # adapters matter
    export_merged_hf(base, adapters, cfg, tmp_path / "merged")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    diff = np.abs(hf_logits(reloaded, tokens, mask) - ours)[mask].max()
    assert diff < TOL, f"max abs logit diff {diff}"


def test_peft_layout_loads_in_peft_with_the_same_logits(tiny, tmp_path):
    peft = pytest.importorskip("peft")
    _, path, base, cfg = tiny
    cfg = cfg.replace(lora=LoraConfig(rank=4, alpha=12.0, targets=("q", "v", "o", "down")))
    adapters = _trained_adapters(cfg, seed=3)
    tokens, mask = padded_batch(cfg.vocab_size, [18, 7], 18, left=False, seed=2)
    ours = _logits(lora.with_adapters(base, adapters), cfg, tokens, mask)
    export_peft_adapters(adapters, cfg, tmp_path / "adapter", base_model=str(path))
    hf_base = AutoModelForCausalLM.from_pretrained(path).eval()
    model = peft.PeftModel.from_pretrained(hf_base, tmp_path / "adapter").eval()
    diff = np.abs(hf_logits(model, tokens, mask) - ours)[mask].max()
    assert diff < TOL, f"max abs logit diff {diff}"
    # And memjax reads the layout back to the same arrays.
    back = load_peft_adapters(tmp_path / "adapter", cfg)
    jax.tree.map(np.testing.assert_array_equal, back, jax.tree.map(np.asarray, adapters))
    with pytest.raises(CheckpointError, match="rank 4"):
        load_peft_adapters(tmp_path / "adapter", cfg.replace(lora=LoraConfig(rank=8)))


def test_lora_section_and_bad_values():
    assert lora_config_from({"rank": 0}) is None
    c = lora_config_from({"rank": 16, "alpha": 32.0, "targets": "q,v"})
    assert c.targets == ("q", "v") and c.scale == 2.0
    with pytest.raises(ValueError, match="lora.targets"):
        LoraConfig(targets=("q", "qkv"))
    with pytest.raises(ValueError, match="lora.rank"):
        LoraConfig(rank=-1)
