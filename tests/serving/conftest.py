import pytest

from memjax.serving.background import ThreadedServer
from memjax.serving.openai_app import ServerSettings

MODEL = "smollm2"


@pytest.fixture(scope="session")
def smollm2():
    from memjax.checkpoints import load_model

    return load_model("packaged:smollm2", param_dtype="float32")


@pytest.fixture(scope="module")
def server(smollm2):
    settings = ServerSettings(
        model_name=MODEL,
        max_body_bytes=64 * 1024,
        max_prompt_tokens=512,
        max_tokens=64,
        default_max_tokens=16,
        max_n=4,
    )
    with ThreadedServer(smollm2, settings) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="session")
def minilm():
    """The packaged MiniLM embedder, loaded once for the memory service's tests."""
    from memjax.memory.embedder import Embedder

    return Embedder.load("packaged:minilm")
