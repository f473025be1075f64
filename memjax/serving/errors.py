"""Every failure answered as OpenAI answers it: a JSON body

    {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature",
               "code": null}}

with a 4xx status for whatever the client can fix (FastAPI's own 422 validation errors, bad
JSON, an unknown route or model, a body or prompt over the limits) and 500 for the server's own.
A body over the size limit is refused while it is read, before it is parsed.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = (
            status,
            message,
            param,
            code,
            kind,
        )


def error_body(message: str, kind: str, param: str | None = None, code: str | None = None):
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(error_body(err.message, err.kind, err.param, err.code), err.status)


def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if first.get("type") == "json_invalid":
        message, param = "the body is not valid JSON", None
    elif first.get("type") == "extra_forbidden":
        message = f"unsupported parameter {param!r}"
    elif param:
        message = f"{param}: {message}"
    return JSONResponse(error_body(message, "invalid_request_error", param), 400)


def _http(request: Request, exc: HTTPException) -> JSONResponse:
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return JSONResponse(error_body(str(exc.detail), kind), exc.status_code)


def _internal(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(error_body(f"internal error: {exc}", "server_error"), 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, lambda request, exc: error_response(exc))
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _internal)


def too_large(max_bytes: int) -> dict:
    """The 413 body of a request over the server's size limit (memjax.http_bounds.BodyLimit)."""
    message = f"request body over the server's limit of {max_bytes} bytes"
    return error_body(message, "invalid_request_error", None, "too_large")
