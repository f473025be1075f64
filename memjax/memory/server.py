"""The retrieval HTTP server: Search-R1's and MemSearcher's protocols over one corpus index.

    POST /retrieve       {"queries": [str], "topk": int = 3, "return_scores": bool = false}
        -> {"result": [[{"document": {"id", "contents", ...}, "score": float}, ...], ...]}
           (without scores each item is the document itself)                    [Search-R1]
    POST /search         {"query": str, "top_n": int = 10, "return_score": bool = false}
        -> [{"id", "contents"}, ...], or [[docs...], [scores...]] with scores  [MemSearcher]
    POST /batch_search   {"query": [str], "top_n": int = 10, "return_score": bool = false}
        -> [[docs...], ...], or [[[docs...], ...], [[scores...], ...]] with scores
    GET  /health         {"status": "ok", "documents": N, "pending": n, "failed_queries": n,
                          "repaired_queries": n}

The defaults are those of the reference servers (Search-R1 topk 3; MemSearcher top_n 10, which
agents get when a model omits `top_n`). As in those servers (pydantic models), unknown fields
are ignored and numbers written as strings ("5") are accepted; an empty or blank `/search`
query is refused, as MemSearcher's server does. Search-R1's trainer sends its whole rollout
batch (512 prompts x 5 = 2,560 queries) in one `/retrieve`, so queries are embedded and
searched `query_chunk` at a time. Query texts pass through `memjax.text.valid_text` (a lone
surrogate is searched as U+FFFD); a query that still cannot be searched gets no passages and
is counted (`failed_queries` in /health), and the rest of the batch is answered.

FastAPI on uvicorn (`memjax.http_bounds`), with every request's work bounded:
- one deadline per request, from its first byte to its answer (`deadline` seconds): headers
  or body that do not arrive by then get 408, a search not done by then 503;
- searches run on a pool of `workers` threads; more than `max_pending` requests waiting for
  it are refused 503 at once, rather than queued without end;
- the request: `max_body_bytes` (413); the answer: queries x k at most `max_results` (413,
  refused before searching) and the passages' text at most `max_answer_chars` (413).

Every error is JSON {"error": message}: 400 for a body that is not JSON (also: nested deeper
than 64 levels, integers of more than 18 digits; see memjax.bounded_input), holds wrong values,
or comes with conflicting Content-Length headers; 404 unknown path, 405 a method the path does
not take, 408/411/413/503 as above, 500 a failure of the server itself. A failing request never
stops the server. Bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from memjax.bounded_input import (
    HUGE_NUMBER,
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    TOO_DEEP,
    ascii_int,
    loads,
)
from memjax.errors import StaleArtefactError
from memjax.http_bounds import (
    BoundedServer,
    HttpLimits,
    json_error,
    read_body,
    until_deadline,
)
from memjax.memory.corpus import Retriever, read_index_meta
from memjax.text.valid import valid_text

log = logging.getLogger(__name__)


class BadRequest(ValueError):
    status = 400


class AnswerTooLarge(BadRequest):
    status = 413


@dataclass(frozen=True)
class ServerLimits:
    """What one request may cost the server."""

    deadline: float = 30.0  # seconds from a request's first byte to its answer
    max_body_bytes: int = 1 << 20
    workers: int = 4  # threads that search (the retriever itself searches one batch at a time)
    max_pending: int = 64  # requests waiting for a worker before new ones get 503
    # queries x k per request: Search-R1's 2,560 queries x topk 3 = 7,680 pass; 64 queries x
    # 1,000 (an 808-byte request) would not.
    max_results: int = 20_000
    max_answer_chars: int = 32 << 20  # the passages' text in one answer

    def __post_init__(self):
        for name in ("workers", "max_pending", "max_results", "max_answer_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def http(self) -> HttpLimits:
        return HttpLimits(self.deadline, self.max_body_bytes)


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
    if not valid_text(value).strip():
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
        max_results: int = ServerLimits.max_results,
        max_answer_chars: int = ServerLimits.max_answer_chars,
    ):
        if query_chunk < 1:
            raise ValueError(f"query_chunk must be at least 1, got {query_chunk}")
        self.retriever = retriever
        self.default_topk, self.default_top_n = default_topk, default_top_n
        self.max_k, self.query_chunk = max_k, query_chunk
        self.max_results, self.max_answer_chars = max_results, max_answer_chars

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

    def stats(self) -> dict:
        return {
            "failed_queries": getattr(self.retriever, "failed_queries", 0),
            "repaired_queries": getattr(self.retriever, "repaired_queries", 0),
        }

    def _search_docs(self, queries: list[str], k: int) -> list[list[tuple[dict, float]]]:
        """search_docs over `query_chunk` queries at a time: memory stays bounded by the
        chunk (its [chunk, D] embeddings and [chunk, k] hits), not by the request; the
        answer by `max_results` and `max_answer_chars`."""
        if len(queries) * k > self.max_results:
            raise AnswerTooLarge(
                f"{len(queries)} queries x k {k} = {len(queries) * k} results, over the "
                f"server's {self.max_results} per request; send fewer queries or a smaller k"
            )
        results, chars = [], 0
        for start in range(0, len(queries), self.query_chunk):
            chunk = self.retriever.search_docs(queries[start : start + self.query_chunk], k)
            chars += sum(len(doc["contents"]) for row in chunk for doc, _ in row)
            if chars > self.max_answer_chars:
                raise AnswerTooLarge(
                    f"the answer's passages exceed {self.max_answer_chars} characters; "
                    "send fewer queries or a smaller k"
                )
            results += chunk
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


def _answer(service: RetrievalService, path: str, raw: bytes, max_chars: int) -> tuple[int, Any]:
    """(status, JSON bytes or error payload) for one POST body; runs on a worker thread."""
    body, reason = loads(raw, max_chars=max_chars)
    if reason is not None:
        detail = _BODY_REFUSED.get(reason, "")
        return 400, {"error": "the body is not valid JSON" + (f" ({detail})" if detail else "")}
    try:
        payload = service.handle(path, body)
    except BadRequest as e:
        return e.status, {"error": str(e)}
    return 200, json.dumps(payload, ensure_ascii=False).encode()


def make_app(service: RetrievalService, limits: ServerLimits) -> FastAPI:
    """The FastAPI application: the three POST routes, /health and JSON errors."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="retrieval")
    http_limits = limits.http()
    pending = [0]  # requests holding or waiting for a worker (touched on the event loop only)
    app.state.pool = pool

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):
        if exc.status_code == 404:
            return json_error(404, f"unknown path {request.url.path}")
        if exc.status_code == 405:
            return json_error(405, f"{request.method} is not served on {request.url.path}")
        return json_error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception):
        log.error("retrieval request failed", exc_info=exc)
        return json_error(500, f"{type(exc).__name__}: {exc}", close=True)

    @app.get("/health")
    async def health():
        stats = service.stats()
        return {"status": "ok", "documents": len(service.retriever), "pending": pending[0], **stats}

    async def post(request: Request):
        raw, error = await read_body(request, http_limits)
        if error is not None:
            return error
        if pending[0] >= limits.max_pending:
            return json_error(503, f"busy: {pending[0]} requests are already waiting")
        pending[0] += 1
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(
            pool, _answer, service, request.url.path, raw, limits.max_body_bytes
        )
        work.add_done_callback(lambda _: pending.__setitem__(0, pending[0] - 1))
        try:
            status, payload = await until_deadline(request, http_limits, work)
        except TimeoutError:
            return json_error(
                503, f"not answered within the request deadline of {limits.deadline:g} s"
            )
        if status != 200:
            return json_error(status, payload["error"])
        return Response(payload, media_type="application/json")

    for path in ("/retrieve", "/search", "/batch_search"):
        app.add_api_route(path, post, methods=["POST"])
    return app


def make_server(
    service: RetrievalService,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = 1 << 20,
    deadline: float = 30.0,
    limits: ServerLimits | None = None,
) -> BoundedServer:
    """A bound, not yet serving, server (port 0 picks a free port); `limits` overrides
    `max_body_bytes` and `deadline`. The service's answer limits come from its own fields."""
    limits = limits or ServerLimits(deadline=deadline, max_body_bytes=max_body_bytes)
    return BoundedServer(make_app(service, limits), limits.http(), host, port)


def _limits(config) -> ServerLimits:
    defaults = ServerLimits()
    return ServerLimits(
        deadline=float(config.get("deadline", defaults.deadline)),
        max_body_bytes=int(config.get("max_body_bytes", defaults.max_body_bytes)),
        workers=int(config.get("workers", defaults.workers)),
        max_pending=int(config.get("max_pending", defaults.max_pending)),
        max_results=int(config.get("max_results", defaults.max_results)),
        max_answer_chars=int(config.get("max_answer_chars", defaults.max_answer_chars)),
    )


def serve_job(config, workdir) -> None:
    """The `retriever.serve` job: load `config.index_dir` and serve until SIGINT/SIGTERM."""
    del workdir
    from memjax.memory.embedder import Embedder

    limits = _limits(config)
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
        retriever,
        config.topk,
        config.top_n,
        config.max_k,
        config.query_chunk,
        limits.max_results,
        limits.max_answer_chars,
    )
    server = make_server(service, config.host, config.port, limits=limits)
    host, port = server.server_address[:2]
    print(f"serving {len(retriever)} documents on http://{host}:{port}", flush=True)
    # uvicorn stops gracefully on SIGINT / SIGTERM, then raises the signal again for the
    # handler it found: a quiet one here, so a stopped server exits 0 without a traceback.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
