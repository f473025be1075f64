"""The retrieval server under malformed requests over real HTTP on 127.0.0.1 (JSON 4xx every
time, no hang past its read timeout, still serving afterwards), and a Search-R1-sized batch.

A bag-of-words embedder and an exact index stand in for MiniLM and ScaNN, so the 2,560
queries take milliseconds; the real encoder and index are served in test_server.py."""

import json
import socket
import threading
import time

import numpy as np
import pytest

from memjax.memory.client import post_json
from memjax.memory.corpus import Retriever
from memjax.memory.index import ExactIndex
from memjax.memory.server import RetrievalService, make_server

READ_TIMEOUT = 1.0
DOCS = {
    f"d{i}": {"id": f"d{i}", "contents": f'"Title {i}"\nword{i} topic{i % 5}'} for i in range(50)
}


class CountedWords:
    """Unit bag-of-words vectors over the corpus's own words ("word7" -> axis 7, "topic3" ->
    axis 53, anything else -> the last axis): texts sharing words score high, no collisions."""

    dim = 64

    def encode(self, texts, kind="query"):
        out = np.zeros((len(texts), self.dim), np.float32)  # [N, D]
        for row, text in zip(out, texts):
            for word in text.split():
                if word.startswith("word") and word[4:].isdigit():
                    row[int(word[4:])] += 1.0
                elif word.startswith("topic") and word[5:].isdigit():
                    row[50 + int(word[5:])] += 1.0
                else:
                    row[-1] += 1.0
            row[-1] += 1e-3  # never all zero
        return out / np.linalg.norm(out, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def server():
    embedder = CountedWords()
    index = ExactIndex(embedder.dim)
    index.upsert(list(DOCS), embedder.encode([d["contents"] for d in DOCS.values()]))
    service = RetrievalService(Retriever(index, DOCS, embedder), query_chunk=100)
    srv = make_server(service, "127.0.0.1", 0, max_body_bytes=1 << 20, read_timeout=READ_TIMEOUT)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[:2]
    srv.shutdown()
    srv.server_close()


def _exchange(address, request: bytes, wait: float = 10.0) -> tuple[int, dict, float]:
    """Sends raw bytes, reads one full response; (status, JSON payload, seconds it took)."""
    t0 = time.perf_counter()
    with socket.create_connection(address, timeout=wait) as s:
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, f"connection closed without a response to {request[:60]!r}"
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        assert headers["Content-Type"] == "application/json"
        while len(body) < int(headers["Content-Length"]):
            chunk = s.recv(65536)
            assert chunk, "connection closed mid-response"
            body += chunk
    return int(lines[0].split()[1]), json.loads(body), time.perf_counter() - t0


def _post(path: str, body: bytes, length: int | None = None) -> bytes:
    length = len(body) if length is None else length
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    return head.encode() + body


def _still_serving(address) -> None:
    url = f"http://{address[0]}:{address[1]}"
    assert post_json(url + "/search", {"query": "word7", "top_n": 1})[0]["id"] == "d7"


DEEP = b"[" * 5000 + b"]" * 5000
MALFORMED = [
    ("deep nesting", _post("/retrieve", b'{"queries": ' + DEEP + b"}"), 400, "nested deeper"),
    ("deep bare", _post("/search", DEEP), 400, "nested deeper"),
    (
        "huge number",
        _post("/retrieve", b'{"queries": ["a"], "topk": ' + b"9" * 5000 + b"}"),
        400,
        "more than 18 digits",
    ),
    ("unicode digit", _post("/retrieve", '{"queries": ["a"], "topk": "²"}'.encode()), 400, "topk"),
    (
        "unicode digit top_n",
        _post("/search", '{"query": "a", "top_n": "٣"}'.encode()),
        400,
        "top_n",
    ),
    ("invalid utf-8", _post("/search", b'{"query": "\xff"}'), 400, "not valid JSON"),
    ("empty query", _post("/search", b'{"query": ""}'), 400, "must not be empty"),
    ("blank query", _post("/search", b'{"query": " \\n\\t "}'), 400, "must not be empty"),
    ("PUT", b"PUT /search HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 501, "PUT"),
    ("DELETE", b"DELETE /search HTTP/1.1\r\nHost: x\r\n\r\n", 501, "DELETE"),
    ("unknown method", b"FROB /search HTTP/1.1\r\nHost: x\r\n\r\n", 501, "FROB"),
    ("garbage request line", b"GARBAGE\r\n\r\n", 400, "request"),
    ("length '²'", b"POST /search HTTP/1.1\r\nContent-Length: \xc2\xb2\r\n\r\n{}", 411, "Length"),
    ("no length", b"POST /search HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Length"),
    ("too long", _post("/search", b"", length=1 << 30), 413, "over"),
]


@pytest.mark.parametrize(
    "name, request_bytes, status, message", MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_request_gets_json_4xx_and_the_server_keeps_serving(
    server, name, request_bytes, status, message
):
    code, payload, _ = _exchange(server, request_bytes)
    assert code == status and message in payload["error"], payload
    _still_serving(server)


def test_body_shorter_than_its_length_times_out_with_408(server):
    code, payload, seconds = _exchange(server, _post("/search", b'{"query": "wo', length=100))
    assert code == 408 and "13 of 100 bytes" in payload["error"]
    assert READ_TIMEOUT <= seconds < READ_TIMEOUT + 5
    _still_serving(server)


def test_a_stalled_client_does_not_block_others(server):
    with socket.create_connection(server) as stalled:
        stalled.sendall(_post("/search", b"{", length=50))
        _still_serving(server)  # answered while the stalled body is still awaited


def test_search_r1_sized_batch_is_answered_in_full(server):
    """Search-R1's trainer at its default size (512 prompts x 5 rollouts) posts 2,560 queries
    at once, shaped as `search_r1/llm_agent/generation.py::_batch_search` sends them."""
    queries = [DOCS[f"d{i % 50}"]["contents"].split("\n")[1] for i in range(2560)]
    url = f"http://{server[0]}:{server[1]}/retrieve"
    out = post_json(url, {"queries": queries, "topk": 3, "return_scores": True})
    assert len(out["result"]) == 2560 and all(len(row) == 3 for row in out["result"])
    for i in (0, 99, 100, 1234, 2559):  # either side of the server's 100-query chunks
        top = out["result"][i][0]
        assert top["document"]["id"] == f"d{i % 50}" and top["score"] > out["result"][i][1]["score"]
        assert top["document"]["contents"].split("\n")[0] == f'"Title {i % 50}"'
        alone = post_json(url, {"queries": [queries[i]], "topk": 3, "return_scores": True})
        assert alone["result"][0] == out["result"][i]
