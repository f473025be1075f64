"""One body-size limit for memjax's ASGI servers, each answering in its own error shape."""

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from memjax.http_bounds import BodyLimit
from memjax.serving import errors


def _client(refusal) -> TestClient:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request):
        return {"bytes": len(await request.body())}

    app.add_middleware(BodyLimit, max_bytes=10, refusal=refusal)
    return TestClient(app)


def _chunks():  # no Content-Length: the limit holds while the body streams in
    for _ in range(5):
        yield b"abcd"


@pytest.mark.parametrize("body", [b"x" * 11, _chunks], ids=["content-length", "streamed"])
def test_a_body_over_the_limit_gets_413_in_the_servers_shape(body):
    client = _client(errors.too_large)
    response = client.post("/echo", content=body() if callable(body) else body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "10 bytes" in response.json()["error"]["message"]


def test_a_body_within_the_limit_reaches_the_route():
    client = _client(lambda n: {"detail": f"over {n}"})
    assert client.post("/echo", content=b"x" * 10).json() == {"bytes": 10}
    assert client.post("/echo", content=b"x" * 11).json() == {"detail": "over 10"}
