"""Fixtures shared by the MemSearcher job tests: the SmolLM2 tokenizer (slow to read from its
GGUF file, so loaded once) and a tiny random decoder over its vocabulary."""

import jax
import pytest

from memjax.models.config import DecoderConfig
from memjax.models.decoder import decoder_abstract
from memjax.models.params import init_params


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from memjax.checkpoints.packaged import smollm2_gguf
    from memjax.checkpoints.tokenizer import load_tokenizer

    return load_tokenizer(smollm2_gguf())


def tiny_decoder(vocab_size: int, seed: int = 0):
    """(params, cfg) of a 2-layer random Llama over a real tokenizer's vocabulary."""
    cfg = DecoderConfig(
        "llama",
        vocab_size=vocab_size,
        embed_dim=32,
        mlp_dim=64,
        num_layers=2,
        num_heads=2,
        num_kv_heads=1,
        head_dim=16,
        max_position_embeddings=4096,
        tie_embeddings=True,
        param_dtype="float32",
        compute_dtype="float32",
    )
    params = jax.jit(lambda k: init_params(decoder_abstract(cfg), k))(jax.random.key(seed))
    return params, cfg
