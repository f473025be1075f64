"""An Engine behind a thread: requests in from any thread, completions out as futures.

    front = BackgroundEngine(Engine(params, cfg, eos_ids=tok.eos_ids, tokenizer=tok))
    future = front.submit(Request(prompt_ids, SamplingParams(max_new_tokens=64)))
    completion = future.result()            # or `await asyncio.wrap_future(future)`
    front.close()

The Engine is not thread-safe, so one daemon thread owns it: it takes the requests submitted
since its last step, then steps the engine while it has work, and sleeps when it has none. A
request submitted while others decode joins them at the next step. A request the engine
refuses (RequestError) fails its future before any step; a step that raises fails the future
of every request the engine held, drops that work, and the thread goes on serving new ones.

A future cancelled before the thread takes its request is never submitted. Once taken, a
request runs to its end (the engine has no way to drop one mid-decode) and its completion is
not delivered to a cancelled caller.
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future

from memjax.engine.engine import Engine
from memjax.engine.requests import Completion, Request, RequestError


@dataclasses.dataclass
class FrontStats:
    submitted: int = 0
    refused: int = 0  # RequestError at submit
    completed: int = 0
    failed_steps: int = 0
    steps: int = 0


class BackgroundEngine:
    def __init__(self, engine: Engine, *, name: str = "memjax-engine"):
        self.engine = engine
        self.stats = FrontStats()
        self._wake = threading.Condition()
        self._inbox: list[tuple[Request, Future]] = []  # guarded by _wake
        self._closed = False  # guarded by _wake
        self._pending: dict[int, Future] = {}  # the engine's request ids; the thread's own
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: Request) -> Future[Completion]:
        future: Future[Completion] = Future()
        with self._wake:
            if self._closed:
                raise RuntimeError("the engine's thread is closed")
            self._inbox.append((request, future))
            self.stats.submitted += 1
            self._wake.notify()
        return future

    def close(self, timeout: float | None = 30.0) -> None:
        """Stops the thread after its current step; requests not finished by then fail."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __enter__(self) -> BackgroundEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the engine's thread ----------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            with self._wake:
                while not (self._inbox or self._closed or self.engine.busy):
                    self._wake.wait()
                taken, self._inbox = self._inbox, []
                closed = self._closed
            if closed:
                self._fail(list(self._pending.values()) + [f for _, f in taken], _closed_error())
                return
            self._take(taken)
            if self.engine.busy:
                self._step()

    def _take(self, taken: list[tuple[Request, Future]]) -> None:
        for request, future in taken:
            if not future.set_running_or_notify_cancel():  # the caller left before its turn
                continue
            try:
                rid = self.engine.submit(request)
            except RequestError as err:
                self.stats.refused += 1
                future.set_exception(err)
                continue
            self._pending[rid] = future

    def _step(self) -> None:
        try:
            finished = self.engine.step()
        except Exception as err:  # noqa: BLE001 - every waiting caller gets the error instead
            self.stats.failed_steps += 1
            self._fail(list(self._pending.values()), err)
            self._pending.clear()
            self.engine.clear()
            return
        self.stats.steps += 1
        for rid, completion in finished:
            future = self._pending.pop(rid, None)
            if future is not None:
                self.stats.completed += 1
                future.set_result(completion)

    @staticmethod
    def _fail(futures: list[Future], err: BaseException) -> None:
        for future in futures:  # running: taken by the engine; pending: still in the inbox
            if future.running() or future.set_running_or_notify_cancel():
                future.set_exception(err)


def _closed_error() -> RuntimeError:
    return RuntimeError("the engine's thread was closed before this request finished")
