"""The JAX BERT encoder against transformers' BertModel (+ the same pooling), on the packaged
all-MiniLM-L6-v2 and on tiny random BERTs saved with save_pretrained."""

import json

import numpy as np
import pytest
import torch
import transformers

from memjax.checkpoints.encoder_io import EncoderCheckpointError, load_hf_encoder
from memjax.checkpoints.packaged import minilm_dir
from memjax.memory.embedder import Embedder, length_bucket
from memjax.models import encoder
from memjax.models.config import ConfigError
from memjax.models.encoder_config import LAYOUTS, EmbeddingRecipe, EncoderConfig, recipe_from_dir

SENTENCES = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "hi",
    "Melanie painted a sunrise over the lake last year, and she is proud of it.",
    "Where did Alice move after she finished her PhD in computational biology?",
    "The Eiffel Tower is 330 metres tall. " * 12,  # long: exercises a larger length bucket
    "Bob's favourite food is pizza with cheese and chicken.",
    "query: what is the capital of France?",
    "",
]


def _torch_embed(model, tok, texts, pooling, max_length):
    batch = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    pooled = h[:, 0] if pooling == "cls" else (h * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


@pytest.mark.heavy
def test_packaged_minilm_matches_transformers():
    path = minilm_dir()
    embedder = Embedder.load("packaged:minilm", batch_size=4)
    assert embedder.recipe == EmbeddingRecipe(pooling="mean", normalize=True, max_length=256)
    ours = embedder.encode(SENTENCES)  # [8, 384]
    model = transformers.BertModel.from_pretrained(str(path)).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    ref = _torch_embed(model, tok, SENTENCES, "mean", 256)
    cosine = np.sum(ours * ref, axis=1)
    assert cosine.min() >= 0.9999, cosine
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def _tiny_bert(tmp_path, hidden_act="gelu", cls=transformers.BertModel):
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=120,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_act=hidden_act,
    )
    model = cls(config).eval()
    with torch.no_grad():  # random LayerNorm and bias values, so a swapped tensor shows
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(tmp_path)
    return model.bert if hasattr(model, "bert") else model


@pytest.mark.parametrize(
    "hidden_act, cls",
    [("gelu", transformers.BertModel), ("gelu_new", transformers.BertForMaskedLM)],
)
def test_tiny_random_bert_hidden_states_and_pooling(tmp_path, hidden_act, cls):
    ref_model = _tiny_bert(tmp_path, hidden_act, cls)
    params, cfg = load_hf_encoder(tmp_path)
    assert cfg.hidden_act == hidden_act and cfg.num_layers == 2
    rng = np.random.default_rng(0)
    lengths = [11, 3, 16, 1]
    tokens = np.zeros((4, 16), np.int32)
    mask = np.zeros((4, 16), bool)
    for i, n in enumerate(lengths):
        tokens[i, :n] = rng.integers(1, 120, n)
        mask[i, :n] = True
    ours = np.asarray(encoder.forward(params, tokens, mask, cfg))  # [4, 16, 32]
    with torch.no_grad():
        ref = ref_model(
            input_ids=torch.tensor(tokens, dtype=torch.long),
            attention_mask=torch.tensor(mask, dtype=torch.long),
        ).last_hidden_state.numpy()
    for i, n in enumerate(lengths):  # padded positions are garbage on both sides
        np.testing.assert_allclose(ours[i, :n], ref[i, :n], atol=1e-4, rtol=0)
    for pooling in ("mean", "cls"):
        pooled = np.asarray(encoder.pool(ours, mask, EmbeddingRecipe(pooling=pooling)))
        m = mask[..., None]
        want = ref[:, 0] if pooling == "cls" else (ref * m).sum(1) / m.sum(1)
        want = want / np.linalg.norm(want, axis=1, keepdims=True)
        np.testing.assert_allclose(pooled, want, atol=1e-4, rtol=0)


def test_layouts_and_prefixes():
    assert LAYOUTS["e5"].pooling == "mean" and LAYOUTS["e5"].prefix("query") == "query: "
    assert LAYOUTS["e5"].prefix("passage") == "passage: "
    assert LAYOUTS["bge"].pooling == "cls" and LAYOUTS["bge"].prefix("passage") == ""
    with pytest.raises(ValueError, match="query.*passage"):
        LAYOUTS["e5"].prefix("document")
    recipe = recipe_from_dir(minilm_dir())
    assert (recipe.pooling, recipe.normalize, recipe.max_length) == ("mean", True, 256)
    assert recipe_from_dir(minilm_dir(), "bge").pooling == "cls"
    with pytest.raises(ConfigError, match="unknown"):
        recipe_from_dir(minilm_dir(), "sbert")


def test_embedder_prefixes_bucketing_and_order(tmp_path):
    _tiny_bert(tmp_path)
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {
        "[PAD]": 0,
        "[UNK]": 1,
        **{w: i + 2 for i, w in enumerate(["query", ":", "passage", "a", "b", "c"])},
    }
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    e5 = Embedder.load(str(tmp_path), layout="e5", batch_size=2)
    assert e5.tokenize(["a b"], kind="query") == [[vocab[w] for w in ("query", ":", "a", "b")]]
    assert e5.tokenize(["a b"], kind="passage")[0][0] == vocab["passage"]
    texts = ["a", "a b c " * 7, "b c", "c", "a b"]
    whole = e5.encode(texts)
    one_by_one = np.concatenate([e5.encode([t]) for t in texts])
    np.testing.assert_allclose(whole, one_by_one, atol=1e-5)
    assert not np.allclose(e5.encode(["a b"], kind="query"), e5.encode(["a b"], kind="passage"))
    assert [length_bucket(n, 24) for n in (1, 8, 9, 17, 100)] == [8, 8, 16, 24, 24]


def test_bad_checkpoints_name_the_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ConfigError, match="config.json.*gpt2"):
        EncoderConfig.from_hf_dir(tmp_path)
    _tiny_bert(tmp_path / "m")
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    cfg["hidden_size"] = 48
    cfg["num_attention_heads"] = 4
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EncoderCheckpointError, match="does not fit"):
        load_hf_encoder(tmp_path / "m")
