"""Concurrent requests gathered into shared sampler calls.

    batcher = Batcher(engine, window_s=0.005)
    choices = await batcher.submit(generation)        # from any request handler

The first request to arrive opens a window of `window_s`; every request that arrives in it (and
every one that arrives while a sampler call runs) goes into the next round. A round's requests
are grouped by `generation.batch_key` and each group is one sampler call of at most
`max_batch_rows` rows. Calls run one at a time on a worker thread, so the event loop keeps
accepting requests (and answering /v1/models) while the device decodes.
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor

from memjax.serving.generation import Choice, Generation, GenerationEngine, batch_key


@dataclasses.dataclass
class BatchStats:
    requests: int = 0
    calls: int = 0
    rows: int = 0  # completions sampled (a request with n=2 is two rows)


class Batcher:
    def __init__(self, engine: GenerationEngine, window_s: float = 0.005, max_batch_rows: int = 32):
        self.engine = engine
        self.window_s = window_s
        self.max_batch_rows = max_batch_rows
        self.stats = BatchStats()
        self._pending: list[tuple[Generation, asyncio.Future]] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memjax-sampler")

    async def submit(self, generation: Generation) -> list[Choice]:
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._wake = asyncio.Event()
            self._worker = loop.create_task(self._serve())
        future = loop.create_future()
        self._pending.append((generation, future))
        self.stats.requests += 1
        self._wake.set()
        return await future

    async def _serve(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.window_s)  # let the requests sent together arrive
            self._wake.clear()
            taken, self._pending = self._pending, []
            for group in _groups(taken, self.max_batch_rows):
                await self._call(group)
            if self._pending:
                self._wake.set()

    async def _call(self, group: list[tuple[Generation, asyncio.Future]]) -> None:
        live = [(g, f) for g, f in group if not f.done()]  # a client that left is not served
        if not live:
            return
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(
                self._executor, self.engine.run, [g for g, _ in live]
            )
        except Exception as err:  # every waiting request gets the error, the server lives on
            for _, future in live:
                if not future.done():
                    future.set_exception(err)
            return
        self.stats.calls += 1
        self.stats.rows += sum(g.n for g, _ in live)
        for (_, future), choices in zip(live, results):
            if not future.done():
                future.set_result(choices)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _groups(items, max_rows: int) -> list[list]:
    """Items by batch key, in arrival order, each group cut to at most `max_rows` rows."""
    by_key: dict[tuple, list[list]] = {}
    for g, future in items:
        chunks = by_key.setdefault(batch_key(g), [[]])
        if chunks[-1] and sum(x.n for x, _ in chunks[-1]) + g.n > max_rows:
            chunks.append([])
        chunks[-1].append((g, future))
    return [chunk for chunks in by_key.values() for chunk in chunks]
