import pytest


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """The packaged SmolLM2 tokenizer (slow to read from its GGUF file: loaded once)."""
    from memjax.checkpoints.packaged import smollm2_gguf
    from memjax.checkpoints.tokenizer import load_tokenizer

    return load_tokenizer(smollm2_gguf())
