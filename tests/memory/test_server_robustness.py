"""The retrieval server under malformed requests over real HTTP on 127.0.0.1 (JSON 4xx every
time, no hang past its read timeout, still serving afterwards), and a Search-R1-sized batch.

A bag-of-words embedder and an exact index stand in for MiniLM and ScaNN, so the 2,560
queries take milliseconds; the real encoder and index are served in test_server.py."""

import json
import select
import socket
import threading
import time
import urllib.request

import numpy as np
import pytest

from memjax.memory.client import post_json
from memjax.memory.corpus import Retriever
from memjax.memory.index import ExactIndex
from memjax.memory.server import BadRequest, RetrievalService, ServerLimits, make_server

DEADLINE = 1.0
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
    srv = make_server(service, "127.0.0.1", 0, max_body_bytes=1 << 20, deadline=DEADLINE)
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
        headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:])}
        assert headers["content-type"] == "application/json"
        while len(body) < int(headers["content-length"]):
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
    ("PUT", b"PUT /search HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405, "PUT"),
    ("DELETE", b"DELETE /search HTTP/1.1\r\nHost: x\r\n\r\n", 405, "DELETE"),
    ("unknown method", b"FROB /search HTTP/1.1\r\nHost: x\r\n\r\n", 405, "FROB"),
    ("garbage request line", b"GARBAGE\r\n\r\n", 400, "request"),
    ("length '²'", b"POST /search HTTP/1.1\r\nContent-Length: \xc2\xb2\r\n\r\n{}", 400, "Length"),
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
    assert DEADLINE <= seconds < DEADLINE + 5
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


def _trickle(address, request: bytes, every: float = 0.2) -> tuple[int, dict, float]:
    """Sends `request` one byte every `every` seconds until the server answers; (status,
    payload, seconds from the first byte to the answer)."""
    t0 = time.perf_counter()
    with socket.create_connection(address, timeout=30) as s:
        for byte in request:
            try:
                s.sendall(bytes([byte]))
            except OSError:  # the server answered and closed
                break
            if select.select([s], [], [], every)[0]:
                break
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    seconds = time.perf_counter() - t0
    head, body = data.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body), seconds


@pytest.mark.parametrize(
    "name, request_bytes",
    [
        ("headers", b"POST /search HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100 + b"\r\n\r\n"),
        ("body", _post("/search", b'{"query": "word7", "top_n": 1}' + b" " * 100)),
    ],
)
def test_slow_loris_is_refused_by_the_whole_request_deadline(server, name, request_bytes):
    """A client trickling a byte every 0.2 s never finishes within the deadline: the request
    is answered 408 at its deadline, not held open for as long as each byte keeps coming."""
    code, payload, seconds = _trickle(server, request_bytes)
    assert code == 408 and f"within {DEADLINE:g} s" in payload["error"], payload
    assert seconds < DEADLINE + 5  # each byte arrived well within any per-read timeout
    _still_serving(server)


def test_answer_amplification_is_refused_before_searching(server):
    """An 808-byte request (64 queries, topk 1000) would ask for 64,000 results."""
    body = json.dumps({"queries": ["word7 topic2"] * 64, "topk": 1000}).encode()
    code, payload, _ = _exchange(server, _post("/retrieve", body))
    assert code == 413 and "64000 results" in payload["error"], payload
    body = json.dumps({"query": ["word7 topic2"] * 64, "top_n": 1000}).encode()
    code, payload, _ = _exchange(server, _post("/batch_search", body))
    assert code == 413 and "64000 results" in payload["error"], payload
    _still_serving(server)


def test_passage_characters_bound_the_answer():
    embedder = CountedWords()
    index = ExactIndex(embedder.dim)
    index.upsert(list(DOCS), embedder.encode([d["contents"] for d in DOCS.values()]))
    service = RetrievalService(Retriever(index, DOCS, embedder), max_answer_chars=200)
    with pytest.raises(BadRequest, match="exceed 200 characters") as caught:
        service.handle("/retrieve", {"queries": ["word1", "word2"], "topk": 10})
    assert caught.value.status == 413
    assert len(service.handle("/retrieve", {"queries": ["word1"], "topk": 2})["result"][0]) == 2


def test_conflicting_content_lengths_get_400(server):
    body = b'{"query": "word7", "top_n": 1}'
    request = (
        f"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        f"Content-Length: {len(body) + 5}\r\n\r\n"
    ).encode() + body
    code, payload, _ = _exchange(server, request)
    assert code == 400 and "Content-Length" in payload["error"], payload
    _still_serving(server)


def test_a_lone_surrogate_query_is_searched(server):
    url = f"http://{server[0]}:{server[1]}"
    # json.dumps writes the lone surrogate as the escape "\ud83d", as a model's JSON would.
    out = post_json(url + "/batch_search", {"query": ["word7 \ud83d", "word9"], "top_n": 1})
    assert [row[0]["id"] for row in out] == ["d7", "d9"]
    assert post_json(url + "/search", {"query": "word3 \ud83d\x00", "top_n": 1})[0]["id"] == "d3"


class FailsOn(CountedWords):
    """Raises for any batch holding the text "boom" (a query the encoder cannot take)."""

    def encode(self, texts, kind="query"):
        if "boom" in texts:
            raise RuntimeError("cannot encode")
        return super().encode(texts, kind)


def test_a_query_that_cannot_be_searched_gets_no_passages_and_is_counted():
    embedder = FailsOn()
    index = ExactIndex(embedder.dim)
    index.upsert(list(DOCS), CountedWords().encode([d["contents"] for d in DOCS.values()]))
    service = RetrievalService(Retriever(index, DOCS, embedder))
    out = service.handle("/batch_search", {"query": ["word4", "boom", "word8"], "top_n": 1})
    assert out[0][0]["id"] == "d4" and out[1] == [] and out[2][0]["id"] == "d8"
    assert service.stats()["failed_queries"] == 1


def test_requests_past_the_worker_queue_get_503():
    gate = threading.Event()

    class Slow(CountedWords):
        def encode(self, texts, kind="query"):
            gate.wait(10)
            return super().encode(texts, kind)

    embedder = Slow()
    index = ExactIndex(embedder.dim)
    index.upsert(list(DOCS), CountedWords().encode([d["contents"] for d in DOCS.values()]))
    limits = ServerLimits(deadline=20.0, workers=1, max_pending=1)
    srv = make_server(
        RetrievalService(Retriever(index, DOCS, embedder)), "127.0.0.1", 0, limits=limits
    )
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    address = srv.server_address[:2]
    try:
        first = socket.create_connection(address)
        first.sendall(_post("/search", b'{"query": "word1"}'))
        health = f"http://{address[0]}:{address[1]}/health"
        for _ in range(200):  # until the first request holds the only place
            with urllib.request.urlopen(health, timeout=10) as r:
                if json.loads(r.read())["pending"] == 1:
                    break
            time.sleep(0.05)
        code, payload, _ = _exchange(address, _post("/search", b'{"query": "word2"}'))
        assert code == 503 and "busy" in payload["error"], payload
        gate.set()
        assert b" 200 " in first.recv(65536)
        first.close()
    finally:
        gate.set()
        srv.shutdown()
        srv.server_close()
