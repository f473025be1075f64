"""The memory service: Mem0's REST routes over `memjax.memory_layer.Memory` (FastAPI + uvicorn).

    python -m memjax.launch --config=configs/memory_serve.py --config.server.port=8765 \
        --config.memory.manager.source=/runs/mr1_grpo_s0_manager

    POST   /memories                {"messages": [{"role", "content"}], "user_id", "metadata",
                                     "infer"}                 -> {"results": [{"id", "memory", "event"}]}
    GET    /memories?user_id=U      -> {"results": [memory, ...]}
    GET    /memories/{id}           -> memory                 (?user_id=U: only U's)
    PUT    /memories/{id}           {"text"} (Mem0's "data" too) -> {"message"}
    DELETE /memories/{id}           -> {"message"}
    GET    /memories/{id}/history   -> [{"memory_id", "old_memory", "new_memory", "event",
                                        ..., "provenance"}]
    POST   /search                  {"query", "user_id", "limit"|"top_k"} -> {"results": [...]}
    DELETE /memories?user_id=U      -> {"message"}
    POST   /reset                   -> {"message"}
    POST   /answer                  {"question", "user_id"} -> {"answer", "selected_memories", ...}
    GET    /health                  -> {"status": "ok"}

Payloads and answers are Mem0's server's. Memories are keyed by `user_id` (Mem0's `agent_id`
and `run_id` are refused, not silently merged into one user). Every error is JSON
{"detail": ...} (FastAPI's form, as Mem0's server answers): 400 for values the memory layer
refuses, 404 for an unknown memory or route, 413 for a body over `max_body_bytes`, 422 for a
body that is not JSON or not of the route's shape. Endpoints run in worker threads; the memory
layer serialises each user's operations, so concurrent adds for one user lose nothing.
Bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from memjax.http_bounds import BodyLimit
from memjax.memory_layer import Memory, MemoryInputError, MemoryNotFound
from memjax.memory_layer.shapes import InputLimits

_LIMITS = InputLimits()


class Message(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1, max_length=_LIMITS.max_message_chars)
    name: str | None = Field(default=None, max_length=_LIMITS.max_user_id_chars)


class MemoryCreate(BaseModel):
    messages: list[Message] = Field(min_length=1, max_length=_LIMITS.max_messages)
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool = True


class SearchRequest(BaseModel):
    query: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    limit: int | None = None
    top_k: int | None = None
    filters: dict[str, Any] | None = None


class UpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = None
    data: str | None = None  # Mem0's Python name for the new text


class AnswerRequest(BaseModel):
    question: str
    user_id: str | list[str]
    top_k: int = 30


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"  # loopback only; 0.0.0.0 exposes the memories to the network
    port: int = 8765
    max_body_bytes: int = 1 << 20


def _user_id(user_id, agent_id=None, run_id=None) -> str:
    if agent_id is not None or run_id is not None:
        raise MemoryInputError("agent_id, run_id: this server keys memories by user_id only")
    if user_id is None:
        raise MemoryInputError("user_id: required")
    return user_id


def _install_errors(app: FastAPI) -> None:
    def refused(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 400)

    def not_found(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404)

    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, 422)

    def http(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    def internal(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}: {exc}"}, 500)

    app.add_exception_handler(MemoryInputError, refused)
    app.add_exception_handler(MemoryNotFound, not_found)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http)
    app.add_exception_handler(Exception, internal)


def _too_large(max_bytes: int) -> dict:
    return {"detail": f"request body larger than {max_bytes} bytes"}


def make_app(memory: Memory, settings: ServerSettings = ServerSettings()) -> FastAPI:
    app = FastAPI(title="memjax memory service", version="1.0.0")
    _install_errors(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, refusal=_too_large)

    @app.get("/health")
    def health():
        return {"status": "ok"}

    @app.post("/memories")
    def add_memory(body: MemoryCreate):
        user_id = _user_id(body.user_id, body.agent_id, body.run_id)
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        return memory.add(messages, user_id=user_id, metadata=body.metadata, infer=body.infer)

    @app.get("/memories")
    def get_all(user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None):
        return memory.get_all(_user_id(user_id, agent_id, run_id))

    @app.delete("/memories")
    def delete_all(
        user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ):
        return memory.delete_all(_user_id(user_id, agent_id, run_id))

    @app.get("/memories/{memory_id}")
    def get_memory(memory_id: str, user_id: str | None = None):
        item = memory.get(memory_id, user_id=user_id)
        if item is None:
            raise MemoryNotFound(f"memory id {memory_id[:80]!r}: no such memory")
        return item

    @app.put("/memories/{memory_id}")
    def update_memory(memory_id: str, body: UpdateRequest, user_id: str | None = None):
        text = body.text if body.text is not None else body.data
        if text is None:
            raise MemoryInputError('text: required ({"text": "the new memory"})')
        return memory.update(memory_id, text, user_id=user_id)

    @app.delete("/memories/{memory_id}")
    def delete_memory(memory_id: str, user_id: str | None = None):
        return memory.delete(memory_id, user_id=user_id)

    @app.get("/memories/{memory_id}/history")
    def history(memory_id: str, user_id: str | None = None):
        return memory.history(memory_id, user_id=user_id)

    @app.post("/search")
    def search(body: SearchRequest):
        user_id = _user_id(body.user_id, body.agent_id, body.run_id)
        if body.filters:
            raise MemoryInputError("filters: not supported by this server")
        top_k = body.top_k if body.top_k is not None else body.limit
        return memory.search(body.query, user_id=user_id, top_k=10 if top_k is None else top_k)

    @app.post("/reset")
    def reset():
        memory.reset()
        return {"message": "All memories reset"}

    @app.post("/answer")
    def answer(body: AnswerRequest):
        return memory.answer(body.question, body.user_id, k=body.top_k)

    return app
