import pytest


@pytest.fixture(scope="session")
def minilm():
    """The packaged MiniLM embedder, loaded once for the memory layer's and service's tests."""
    from memjax.memory.embedder import Embedder

    return Embedder.load("packaged:minilm")
