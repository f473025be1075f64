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
are ignored and numbers written as strings ("5") are accepted; anything else that is wrong
gets HTTP 400 with a JSON {"error": message}. Bodies over `max_body_bytes` get 413. A failing
request never stops the server. Bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memjax.memory.corpus import Retriever

log = logging.getLogger(__name__)


class BadRequest(ValueError):
    pass


def _int(body: dict, key: str, default: int, limit: int) -> int:
    value = body.get(key, default)
    if value is None:
        value = default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f'"{key}" must be an integer, got {value!r}')
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
    raise BadRequest(f'"{key}" must be true or false, got {value!r}')


def _texts(body: dict, key: str, many: bool, max_batch: int) -> list[str]:
    if key not in body:
        raise BadRequest(f'missing field "{key}"')
    value = body[key]
    if many:
        if not isinstance(value, list) or not all(isinstance(q, str) for q in value):
            raise BadRequest(f'"{key}" must be a list of strings')
        if len(value) > max_batch:
            raise BadRequest(f'"{key}" holds {len(value)} queries; the limit is {max_batch}')
        return value
    if not isinstance(value, str):
        raise BadRequest(f'"{key}" must be a string')
    return [value]


class RetrievalService:
    """The protocol logic, independent of HTTP: a parsed JSON body in, a JSON value out."""

    def __init__(
        self,
        retriever: Retriever,
        default_topk: int = 3,
        default_top_n: int = 10,
        max_k: int = 1000,
        max_batch: int = 1024,
    ):
        self.retriever = retriever
        self.default_topk, self.default_top_n = default_topk, default_top_n
        self.max_k, self.max_batch = max_k, max_batch

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

    def retrieve(self, body: dict) -> dict:
        queries = _texts(body, "queries", True, self.max_batch)
        k = _int(body, "topk", self.default_topk, self.max_k)
        scores = _bool(body, "return_scores")
        results = self.retriever.search_docs(queries, k)
        if scores:
            rows = [[{"document": d, "score": s} for d, s in row] for row in results]
        else:
            rows = [[d for d, _ in row] for row in results]
        return {"result": rows}

    def search(self, body: dict, many: bool) -> list:
        queries = _texts(body, "query", many, self.max_batch)
        k = _int(body, "top_n", self.default_top_n, self.max_k)
        scores = _bool(body, "return_score")
        results = self.retriever.search_docs(queries, k)
        docs = [[{"id": d["id"], "contents": d["contents"]} for d, _ in row] for row in results]
        values = [[s for _, s in row] for row in results]
        if not many:
            docs, values = docs[0], values[0]
        return [docs, values] if scores else docs


def make_handler(service: RetrievalService, max_body_bytes: int):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path == "/health":
                self._send(200, {"status": "ok", "documents": len(service.retriever)})
            else:
                self._send(404, {"error": f"unknown path {self.path}"})

        def do_POST(self):  # noqa: N802
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self.close_connection = True
                return self._send(411, {"error": "a Content-Length header is required"})
            if int(length) > max_body_bytes:
                self.close_connection = True  # the unread body must not be parsed as a request
                return self._send(413, {"error": f"body over {max_body_bytes} bytes"})
            raw = self.rfile.read(int(length))
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                return self._send(400, {"error": f"the body is not valid JSON: {e}"})
            try:
                self._send(200, service.handle(self.path, body))
            except BadRequest as e:
                self._send(400, {"error": str(e)})
            except LookupError:
                self._send(404, {"error": f"unknown path {self.path}"})
            except Exception as e:  # a bug in one request must not take the server down
                log.exception("retrieval request failed")
                self._send(500, {"error": f"{type(e).__name__}: {e}"})

        def log_message(self, fmt, *args):
            log.debug("%s " + fmt, self.address_string(), *args)

    return Handler


def make_server(
    service: RetrievalService,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = 1 << 20,
) -> ThreadingHTTPServer:
    """A bound, not yet serving, threaded server (port 0 picks a free port)."""
    server = ThreadingHTTPServer((host, port), make_handler(service, max_body_bytes))
    server.daemon_threads = True
    return server


def serve_job(config, workdir) -> None:
    """The `retriever.serve` job: load `config.index_dir` and serve until SIGINT/SIGTERM."""
    del workdir
    from memjax.memory.embedder import Embedder

    embedder = None
    if config.encoder.source:
        embedder = Embedder.load(
            config.encoder.source,
            layout=config.encoder.layout or None,
            batch_size=config.encoder.batch_size,
        )
    retriever = Retriever.load(config.index_dir, embedder)
    service = RetrievalService(retriever, config.topk, config.top_n, config.max_k, config.max_batch)
    server = make_server(service, config.host, config.port, config.max_body_bytes)
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
