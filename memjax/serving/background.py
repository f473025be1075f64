"""A memjax OpenAI-compatible server on 127.0.0.1 in a background thread (real uvicorn), for
notebooks, tests and benchmarks that call it from the same process:

    with ThreadedServer(model, ServerSettings(model_name="smollm2")) as server:
        OpenAI(base_url=server.url, api_key="unused").chat.completions.create(...)
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from memjax.serving.openai_app import ServerSettings, make_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadedServer:
    """`with ThreadedServer(model, settings) as server: server.url` -> http://127.0.0.1:P/v1."""

    def __init__(self, model, settings: ServerSettings, port: int | None = None):
        self.app = make_app(model, settings)
        self.port = port or free_port()
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def stats(self):
        return self.app.state.batcher.stats

    def __enter__(self) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
