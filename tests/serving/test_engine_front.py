"""The engine behind a thread (memjax.engine.background): futures from many threads, refused
requests and failed steps answered at once, cancelled callers dropped, a clean close. A tiny
random model: fast."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memjax.engine import Engine, Request, RequestError
from memjax.engine.background import BackgroundEngine
from memjax.sampling.sampling_params import SamplingParams
from tests.sampling.tiny import tiny_model

PARAMS, CFG = tiny_model(seed=1)
EOS = (5,)


def _engine(slots: int = 2) -> Engine:
    return Engine(
        PARAMS, CFG, eos_ids=EOS, slots=slots, max_len=96, prefill_chunk=16, window_block=32
    )


def _requests(n: int, seed: int = 0) -> list[Request]:
    rng = np.random.default_rng(seed)
    return [
        Request(
            rng.integers(6, CFG.vocab_size, size=int(rng.integers(3, 30))).tolist(),
            SamplingParams(max_new_tokens=int(rng.integers(2, 20)), temperature=0.9),
            key=i,
        )
        for i in range(n)
    ]


def test_requests_from_many_threads_complete_as_the_engine_alone_completes_them():
    requests = _requests(6)
    alone = _engine(slots=1).run(requests)
    with BackgroundEngine(_engine(slots=2)) as front:
        with ThreadPoolExecutor(3) as pool:
            futures = list(pool.map(front.submit, requests))
        got = [f.result(timeout=120) for f in futures]
        assert front.stats.completed == 6 and front.stats.submitted == 6
    for a, b in zip(alone, got):
        assert a.tokens == b.tokens and a.stop_reason == b.stop_reason


def test_a_refused_request_fails_its_future_and_the_others_go_on():
    too_long = Request([7] * 90, SamplingParams(max_new_tokens=20))
    with BackgroundEngine(_engine()) as front:
        bad, good = front.submit(too_long), front.submit(_requests(1)[0])
        with pytest.raises(RequestError, match="max_len=96"):
            bad.result(timeout=60)
        assert good.result(timeout=120).tokens
        assert front.stats.refused == 1


def test_a_failing_step_fails_every_pending_future_and_the_thread_lives_on():
    engine = _engine()
    real_step, calls = engine.step, []

    def step():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("device lost")
        return real_step()

    engine.step = step
    with BackgroundEngine(engine) as front:
        first = [front.submit(r) for r in _requests(2)]
        for f in first:
            with pytest.raises(RuntimeError, match="device lost"):
                f.result(timeout=60)
        assert not engine.busy  # the failed work is dropped, not stepped again
        later = front.submit(_requests(1, seed=3)[0])
        assert later.result(timeout=120).tokens
        assert front.stats.failed_steps == 1


def test_a_cancelled_caller_is_never_submitted():
    engine = _engine()
    real_step, release = engine.step, threading.Event()
    engine.step = lambda: (release.wait(60), real_step())[1]  # holds the thread in a step
    submitted = []
    real_submit = engine.submit
    engine.submit = lambda r: submitted.append(r) or real_submit(r)
    first, second = _requests(2)
    with BackgroundEngine(engine) as front:
        running = front.submit(first)
        while not submitted:  # the thread took `first` and is held in its step
            threading.Event().wait(0.01)
        left = front.submit(second)
        assert left.cancel()  # the caller leaves while its request waits for the thread
        release.set()
        assert running.result(timeout=120).tokens
    assert submitted == [first]


def test_close_fails_what_is_unfinished_and_refuses_new_requests():
    engine = _engine()
    release = threading.Event()
    real_step = engine.step
    engine.step = lambda: (release.wait(60), real_step())[1]
    front = BackgroundEngine(engine)
    futures = [front.submit(r) for r in _requests(2)]
    closing = threading.Thread(target=front.close)
    closing.start()
    release.set()
    closing.join(60)
    for f in futures:  # each either finished in the last step or was failed by the close
        assert f.done()
        if f.exception() is not None:
            assert "closed" in str(f.exception())
    with pytest.raises(RuntimeError, match="closed"):
        front.submit(_requests(1)[0])
