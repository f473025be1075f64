"""GGUF (llama.cpp) files -> memjax decoder parameters, config and tokenizer metadata.

Tensors are dequantized with the `gguf` package and renamed to their Hugging Face names, so the
same loading table serves safetensors and GGUF. llama.cpp's converter permutes the rows of the q
and k projections of Llama models (to its interleaved RoPE layout); memjax undoes that to get
back the rotate-half layout of the HF checkpoint.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

from memjax.checkpoints.decoder_io import CheckpointError, load_decoder_params
from memjax.model_errors import WeightsNotFoundError
from memjax.models.config import DecoderConfig
from memjax.parallel import TRAIN_RULES

SUPPORTED_TYPES = {
    GGMLQuantizationType.F32,
    GGMLQuantizationType.F16,
    GGMLQuantizationType.BF16,
    GGMLQuantizationType.Q8_0,
    GGMLQuantizationType.Q4_0,
    GGMLQuantizationType.Q4_1,
    GGMLQuantizationType.Q4_K,
    GGMLQuantizationType.Q5_K,
    GGMLQuantizationType.Q6_K,
}

# llama.cpp name -> HF name.
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LAYER_RE = re.compile(r"blk\.(\d+)\.(.+)")


def _hf_name(gguf_name: str) -> str | None:
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    m = _LAYER_RE.fullmatch(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}"
    return None


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Inverse of llama.cpp's `permute` of q/k rows. llama.cpp viewed each head's rows as
    [2, Hd/2] and stored them as [Hd/2, 2] (interleaved pairs); this views them as [Hd/2, 2] and
    swaps back to the rotate-half order [2, Hd/2]."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class GGUFFile:
    """A GGUF file as a source of HF-named, dequantized float32 tensors."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise WeightsNotFoundError(f"GGUF file {self.path} does not exist")
        try:
            self.reader = GGUFReader(self.path)
        except Exception as e:  # the reader raises bare ValueErrors on bad magic/version
            raise CheckpointError(f"{self.path}: not a readable GGUF file ({e})") from None
        self.arch = self.field("general.architecture")
        self._tensors = {}
        for t in self.reader.tensors:
            hf = _hf_name(t.name)
            if hf is not None:
                self._tensors[hf] = t
        self._cfg: DecoderConfig | None = None

    def field(self, key: str, default=None):
        f = self.reader.fields.get(key)
        return default if f is None else f.contents()

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def shape(self, name: str) -> tuple[int, ...]:
        # GGUF lists dims fastest-first; numpy (and HF) order is the reverse.
        return tuple(int(d) for d in reversed(self._tensors[name].shape))

    def get(self, name: str) -> np.ndarray:
        t = self._tensors[name]
        if t.tensor_type not in SUPPORTED_TYPES:
            raise CheckpointError(
                f"{self.path}: tensor {t.name} uses quantization {t.tensor_type.name}, which memjax "
                f"does not dequantize; supported: {sorted(q.name for q in SUPPORTED_TYPES)}"
            )
        w = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(self.shape(name))
        if self.arch == "llama" and self._cfg is not None:
            if name.endswith("q_proj.weight"):
                w = _unpermute(w, self._cfg.num_heads)
            elif name.endswith("k_proj.weight"):
                w = _unpermute(w, self._cfg.num_kv_heads)
        return w

    def decoder_config(self, **overrides) -> DecoderConfig:
        arch = self.arch
        if arch not in ("llama", "qwen2"):
            raise CheckpointError(
                f"{self.path}: architecture {arch!r} is not supported; memjax loads llama and qwen2"
            )
        if any(t.name == "rope_freqs.weight" for t in self.reader.tensors):
            raise CheckpointError(
                f"{self.path}: stores Llama 3.1 RoPE scaling as rope_freqs.weight; load the "
                "Hugging Face checkpoint of this model instead"
            )
        get = lambda key, default=None: self.field(f"{arch}.{key}", default)
        try:
            heads = int(get("attention.head_count"))
            embed = int(get("embedding_length"))
            vocab = get("vocab_size") or len(self.reader.fields["tokenizer.ggml.tokens"].data)
            cfg = DecoderConfig(
                model_type=arch,
                vocab_size=int(vocab),
                embed_dim=embed,
                mlp_dim=int(get("feed_forward_length")),
                num_layers=int(get("block_count")),
                num_heads=heads,
                num_kv_heads=int(get("attention.head_count_kv", heads)),
                head_dim=int(
                    get("attention.key_length") or get("rope.dimension_count") or embed // heads
                ),
                rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
                rope_theta=float(get("rope.freq_base", 10000.0)),
                qkv_bias=arch == "qwen2",
                tie_embeddings="lm_head.weight" not in self._tensors,
                max_position_embeddings=int(get("context_length", 4096)),
                **overrides,
            )
        except (TypeError, KeyError) as e:
            raise CheckpointError(f"{self.path}: GGUF metadata is incomplete ({e})") from None
        self._cfg = cfg
        return cfg


def load_gguf_decoder(path: str | Path, mesh=None, rules=TRAIN_RULES, **overrides):
    """(params, cfg) from a GGUF file, dequantized to the configured parameter dtype."""
    gguf_file = GGUFFile(path)
    cfg = gguf_file.decoder_config(**overrides)
    return load_decoder_params(gguf_file, cfg, str(path), mesh, rules), cfg
