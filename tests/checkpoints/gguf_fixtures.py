"""Tiny GGUF files written the way llama.cpp's converter writes them (permuted q/k rows)."""

from __future__ import annotations

import gguf
import numpy as np

from tests.models.hf_fixtures import make_hf_model


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of q/k rows (rotate-half -> interleaved)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def write_tiny_llama_gguf(path, qtype=gguf.GGMLQuantizationType.F32, raw_type_for=None):
    """Writes the tiny HF Llama of hf_fixtures as GGUF; returns the HF model.

    `qtype` quantizes the 2-D weights (F32, F16 or Q8_0). `raw_type_for=(name, type)` writes that
    one tensor with an arbitrary declared type (for unsupported-quantization tests).
    """
    model = make_hf_model("llama")
    cfg = model.config
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(cfg.rope_theta if hasattr(cfg, "rope_theta") else 10000.0)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)

    def add(name, array):
        if raw_type_for and raw_type_for[0] == name:
            qt = raw_type_for[1]
            block, nbytes = gguf.GGML_QUANT_SIZES[qt]
            raw = np.zeros((array.shape[0], array.shape[1] // block * nbytes), np.uint8)
            w.add_tensor(name, raw, raw_dtype=qt)
        elif array.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            if qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(name, array.astype(np.float16))
            else:
                w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, array)

    add("token_embd.weight", sd["model.embed_tokens.weight"])
    add("output_norm.weight", sd["model.norm.weight"])
    add("output.weight", sd["lm_head.weight"])
    for i in range(cfg.num_hidden_layers):
        for hf, ll in _LAYER.items():
            t = sd[f"model.layers.{i}.{hf}"]
            if hf.startswith("self_attn.q_proj"):
                t = _permute(t, cfg.num_attention_heads)
            elif hf.startswith("self_attn.k_proj"):
                t = _permute(t, cfg.num_key_value_heads)
            add(f"blk.{i}.{ll}", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model
