"""GGUF loading: dequantization, llama.cpp's q/k permutation undone, and the packaged SmolLM2."""

import gguf
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.checkpoints.decoder_io import CheckpointError
from memjax.checkpoints.gguf_io import load_gguf_decoder
from memjax.models import decoder
from tests.checkpoints.gguf_fixtures import write_tiny_llama_gguf
from tests.models.hf_fixtures import hf_logits, padded_batch


def _logits(params, cfg, tokens, mask):
    pos = decoder.positions_from_mask(jnp.asarray(mask))
    out, _ = decoder.jit_forward(
        params, jnp.asarray(tokens), pos, cfg, token_mask=jnp.asarray(mask)
    )
    return np.asarray(out)


@pytest.mark.parametrize(
    "qtype,tol",
    [
        (gguf.GGMLQuantizationType.F32, 1e-4),
        (gguf.GGMLQuantizationType.F16, 2e-2),
        (gguf.GGMLQuantizationType.Q8_0, 5e-2),
    ],
    ids=["F32", "F16", "Q8_0"],
)
def test_tiny_gguf_matches_the_hf_model_it_came_from(tmp_path, qtype, tol):
    model = write_tiny_llama_gguf(tmp_path / "tiny.gguf", qtype)
    params, cfg = load_gguf_decoder(tmp_path / "tiny.gguf")
    assert not cfg.tie_embeddings and cfg.num_kv_heads == 2
    tokens, mask = padded_batch(cfg.vocab_size, [24, 11], 24, left=True)
    diff = np.abs(_logits(params, cfg, tokens, mask) - hf_logits(model, tokens, mask))[mask].max()
    assert diff < tol, f"{qtype.name}: max abs diff {diff}"


def test_unsupported_quantization_names_tensor_and_type(tmp_path):
    write_tiny_llama_gguf(
        tmp_path / "q.gguf", raw_type_for=("blk.1.ffn_up.weight", gguf.GGMLQuantizationType.IQ4_NL)
    )
    with pytest.raises(CheckpointError, match=r"blk\.1\.ffn_up\.weight.*IQ4_NL"):
        load_gguf_decoder(tmp_path / "q.gguf")


def test_missing_and_corrupt_gguf_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        load_gguf_decoder(tmp_path / "nope.gguf")
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(CheckpointError, match="bad.gguf"):
        load_gguf_decoder(tmp_path / "bad.gguf")


@pytest.fixture(scope="module")
def smollm2_pair():
    import torch
    from transformers import AutoModelForCausalLM

    from memjax.checkpoints import load_model, packaged

    path = packaged.smollm2_gguf()
    ours = load_model(packaged.SMOLLM2)
    ref = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    return ours, ref


# Prompts whose greedy paths have no near-ties (top-2 logit margin > 0.01 at every step), so
# token identity tests the model rather than float rounding.
PROMPTS = [
    "What is the capital of France?",
    "List two fruits that are red.",
    "How many legs does a spider have?",
    "Tell me a fun fact about owls.",
]


@pytest.mark.heavy
def test_packaged_smollm2_logits_and_greedy_tokens_match_transformers(smollm2_pair):
    import torch

    ours, ref = smollm2_pair
    tok = ours.tokenizer
    for prompt in PROMPTS:
        ids = tok.chat([{"role": "user", "content": prompt}])
        with torch.no_grad():  # transformers: greedy generate with its KV cache
            out = ref.generate(
                torch.tensor([ids]), max_new_tokens=32, do_sample=False, pad_token_id=tok.pad_id
            )
        hf_new = out[0, len(ids) :].tolist()
        tokens = np.array([ids + hf_new], np.int32)
        logits = _logits(ours.params, ours.cfg, tokens, np.ones_like(tokens, bool))[0]
        with torch.no_grad():
            ref_logits = ref(torch.tensor(tokens, dtype=torch.long)).logits[0].numpy()
        diff = np.abs(logits - ref_logits).max()
        assert diff <= 1e-3, f"{prompt!r}: max abs logit diff {diff}"
        # memjax's argmax after every prefix of transformers' output is transformers' next token:
        # by induction, memjax's own greedy decode produces the same tokens.
        ours_greedy = logits[len(ids) - 1 : -1].argmax(-1).tolist()
        assert ours_greedy == hf_new, f"{prompt!r}: greedy tokens differ"


def test_packaged_model_discovery_and_tokenizer_chat_template():
    from memjax.checkpoints import packaged
    from memjax.checkpoints.tokenizer import load_tokenizer

    path = packaged.smollm2_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50e6
    tok = load_tokenizer(path)
    text = tok.chat_text([{"role": "user", "content": "hi"}])
    assert text.endswith("<|im_start|>assistant\n")
    im_end = tok.hf.convert_tokens_to_ids("<|im_end|>")
    assert im_end in tok.eos_ids
    assert tok.decode(tok.encode("hello world")) == "hello world"
    with pytest.raises(ValueError, match="packaged:nothing"):
        packaged.resolve("packaged:nothing")
