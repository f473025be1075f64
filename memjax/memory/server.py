"""The retrieval HTTP server: Search-R1's and MemSearcher's protocols over one corpus index.

    POST /retrieve       {"queries": [str], "topk": int = 3, "return_scores": bool = false}
        -> {"result": [[{"document": {"id", "contents", ...}, "score": float}, ...], ...]}
           (without scores each item is the document itself)                    [Search-R1]
    POST /search         {"query": str, "top_n": int = 10, "return_score": bool = false}
        -> [{"id", "contents"}, ...], or [[docs...], [scores...]] with scores  [MemSearcher]
    POST /batch_search   {"query": [str], "top_n": int = 10, "return_score": bool = false}
        -> [[docs...], ...], or [[[docs...], ...], [[scores...], ...]] with scores
    GET  /health         {"status": "ok", "documents": N}

The defaults are those of the reference servers (Search-R1 topk 3; MemSearcher top_n 10, which
agents get when a model omits `top_n`). As in those servers (pydantic models), unknown fields
are ignored and numbers written as strings ("5") are accepted; an empty or blank `/search`
query is refused, as MemSearcher's server does. Any batch size is answered: Search-R1's trainer
sends its whole rollout batch (512 prompts x 5 = 2,560 queries) in one `/retrieve`, so queries
are embedded and searched `query_chunk` at a time, and only `max_body_bytes` bounds a request.

Every error is JSON {"error": message}, whatever its status: 400 for a body that is not JSON
(also: nested deeper than 64 levels, integers of more than 18 digits; see
memjax.bounded_input) or holds wrong values, 404 unknown path, 408 a body that does not arrive
within `read_timeout` seconds, 411/413 a missing or too large Content-Length, 501 an
unsupported method, 500 a failure of the server itself. A failing request never stops the
server. Bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memjax.bounded_input import (
    HUGE_NUMBER,
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    TOO_DEEP,
    ascii_int,
    loads,
)
from memjax.errors import StaleArtefactError
from memjax.memory.corpus import Retriever, read_index_meta

log = logging.getLogger(__name__)


class BadRequest(ValueError):
    pass


_BODY_REFUSED = {
    TOO_DEEP: f"nested deeper than {MAX_JSON_DEPTH} levels",
    HUGE_NUMBER: f"an integer of more than {MAX_INT_DIGITS} digits",
}


def _int(body: dict, key: str, default: int, limit: int) -> int:
    value = body.get(key, default)
    if value is None:
        value = default
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e18:
        value = int(value)
    number = ascii_int(value, signed=True)  # "5" -> 5; "²", "1e3", True -> None
    if number is None:
        raise BadRequest(f'"{key}" must be an integer, got {_short(value)}')
    value = number
    if not 1 <= value <= limit:
        raise BadRequest(f'"{key}" must be between 1 and {limit}, got {value}')
    return value


def _bool(body: dict, key: str) -> bool:
    value = body.get(key, False)
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BadRequest(f'"{key}" must be true or false, got {_short(value)}')


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _texts(body: dict, key: str, many: bool) -> list[str]:
    if key not in body:
        raise BadRequest(f'missing field "{key}"')
    value = body[key]
    if many:
        if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
            raise BadRequest(f'"{key}" must be a list of strings')
        return value
    if not isinstance(value, str):
        raise BadRequest(f'"{key}" must be a string')
    if not value.strip():
        raise BadRequest(f'"{key}" must not be empty')  # as MemSearcher's server answers
    return [value]


class RetrievalService:
    """The protocol logic, independent of HTTP: a parsed JSON body in, a JSON value out."""

    def __init__(
        self,
        retriever: Retriever,
        default_topk: int = 3,
        default_top_n: int = 10,
        max_k: int = 1000,
        query_chunk: int = 256,
    ):
        if query_chunk < 1:
            raise ValueError(f"query_chunk must be at least 1, got {query_chunk}")
        self.retriever = retriever
        self.default_topk, self.default_top_n = default_topk, default_top_n
        self.max_k, self.query_chunk = max_k, query_chunk

    def handle(self, path: str, body: Any) -> Any:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if path == "/retrieve":
            return self.retrieve(body)
        if path == "/search":
            return self.search(body, many=False)
        if path == "/batch_search":
            return self.search(body, many=True)
        raise LookupError(path)

    def _search_docs(self, queries: list[str], k: int) -> list[list[tuple[dict, float]]]:
        """search_docs over `query_chunk` queries at a time: memory stays bounded by the
        chunk (its [chunk, D] embeddings and [chunk, k] hits), not by the request."""
        results = []
        for start in range(0, len(queries), self.query_chunk):
            results += self.retriever.search_docs(queries[start : start + self.query_chunk], k)
        return results

    def retrieve(self, body: dict) -> dict:
        queries = _texts(body, "queries", True)
        k = _int(body, "topk", self.default_topk, self.max_k)
        scores = _bool(body, "return_scores")
        results = self._search_docs(queries, k)
        if scores:
            rows = [[{"document": d, "score": s} for d, s in row] for row in results]
        else:
            rows = [[d for d, _ in row] for row in results]
        return {"result": rows}

    def search(self, body: dict, many: bool) -> list:
        queries = _texts(body, "query", many)
        k = _int(body, "top_n", self.default_top_n, self.max_k)
        scores = _bool(body, "return_score")
        results = self._search_docs(queries, k)
        docs = [[{"id": d["id"], "contents": d["contents"]} for d, _ in row] for row in results]
        values = [[s for _, s in row] for row in results]
        if not many:
            docs, values = docs[0], values[0]
        return [docs, values] if scores else docs


def make_handler(service: RetrievalService, max_body_bytes: int, read_timeout: float):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = read_timeout  # socket timeout on every read: a stalled client cannot hold us

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (its own timeout) before the answer: nobody to send to.
                self.close_connection = True

        def send_error(self, code, message=None, explain=None):
            """http.server's own errors (bad request line, unsupported method, ...) as JSON,
            not its HTML page. A request line too broken to name a version is answered as
            HTTP/1.0 (http.server would assume 0.9, which has no status line at all)."""
            self.close_connection = True
            if self.request_version == "HTTP/0.9":
                self.request_version = "HTTP/1.0"
            try:
                phrase = HTTPStatus(code).phrase
            except ValueError:
                phrase = "error"
            self._send(int(code), {"error": message or phrase})

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._send(200, {"status": "ok", "documents": len(service.retriever)})
            else:
                self._send(404, {"error": f"unknown path {self.path}"})

        def do_POST(self):  # noqa: N802
            try:
                status, payload = self._answer_post()
            except Exception as e:  # a bug in one request must not take the server down
                log.exception("retrieval request failed")
                self.close_connection = True
                status, payload = 500, {"error": f"{type(e).__name__}: {e}"}
            self._send(status, payload)

        def _answer_post(self) -> tuple[int, Any]:
            length = ascii_int(self.headers.get("Content-Length"))
            if length is None:
                self.close_connection = True
                return 411, {"error": "a Content-Length header is required"}
            if length > max_body_bytes:
                self.close_connection = True  # the unread body must not be parsed as a request
                return 413, {"error": f"body over {max_body_bytes} bytes"}
            raw = self._read_body(length)
            if len(raw) < length:
                self.close_connection = True
                return 408, {
                    "error": f"the body ended after {len(raw)} of {length} bytes "
                    f"(Content-Length), or did not arrive within {read_timeout} s"
                }
            body, reason = loads(raw, max_chars=max_body_bytes)
            if reason is not None:
                detail = _BODY_REFUSED.get(reason, "")
                return 400, {
                    "error": "the body is not valid JSON" + (f" ({detail})" if detail else "")
                }
            try:
                return 200, service.handle(self.path, body)
            except BadRequest as e:
                return 400, {"error": str(e)}
            except LookupError:
                return 404, {"error": f"unknown path {self.path}"}

        def _read_body(self, length: int) -> bytes:
            """Up to `length` bytes; fewer when the client closes or stalls past the timeout."""
            chunks, received = [], 0
            try:
                while received < length:
                    chunk = self.rfile.read1(length - received)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    received += len(chunk)
            except TimeoutError:
                pass
            return b"".join(chunks)

        def log_message(self, fmt, *args):
            log.debug("%s " + fmt, self.address_string(), *args)

    return Handler


def make_server(
    service: RetrievalService,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = 1 << 20,
    read_timeout: float = 30.0,
) -> ThreadingHTTPServer:
    """A bound, not yet serving, threaded server (port 0 picks a free port)."""
    handler = make_handler(service, max_body_bytes, read_timeout)
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def serve_job(config, workdir) -> None:
    """The `retriever.serve` job: load `config.index_dir` and serve until SIGINT/SIGTERM."""
    del workdir
    from memjax.memory.embedder import Embedder

    embedder = None
    built_with = (read_index_meta(config.index_dir).get("encoder") or {}).get("source")
    if config.encoder.source and built_with and config.encoder.source != built_with:
        raise StaleArtefactError(
            f"{config.index_dir}: its vectors were made by encoder {built_with!r}, but "
            f"config.encoder.source={config.encoder.source!r}; queries must be embedded by the "
            "same encoder (leave config.encoder.source empty to use the index's own)"
        )
    if config.encoder.source:
        embedder = Embedder.load(
            config.encoder.source,
            layout=config.encoder.layout or None,
            batch_size=config.encoder.batch_size,
        )
    retriever = Retriever.load(config.index_dir, embedder)
    service = RetrievalService(
        retriever, config.topk, config.top_n, config.max_k, config.query_chunk
    )
    server = make_server(
        service, config.host, config.port, config.max_body_bytes, config.read_timeout
    )
    host, port = server.server_address[:2]
    print(f"serving {len(retriever)} documents on http://{host}:{port}", flush=True)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
