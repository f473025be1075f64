"""memjax's OpenAI-compatible server: the engine against the lock-step batcher, same requests.

    python tools/bench.py serving [--clients 16] [--max-tokens 32] [--pairs 3] [--slots 8]
        [--max-len 0] [--mixed]

The packaged SmolLM2 behind two servers on 127.0.0.1 in one process (real uvicorn, real
`openai` clients): one on the continuous-batching engine (the default, `--slots` slots), one
on the lock-step batcher (`engine=False`, which gathers the requests into shared sampler
calls). One round sends `--clients` chat requests at once from as many client threads
(different questions, greedy, exactly the same requests on both servers); request i asks for
`--max-tokens` tokens, or with `--mixed` for 1/4, 1/2, 3/4 or all of them in turn, which is
where a slot freed early helps. The two servers alternate round by round (tools' paired
timing) after one warm-up round each (compiles); the ratio is the lock-step round's seconds
over the engine's (> 1: the engine is faster). Reported per server: completion tokens/s over
the round's wall time and p50/p99 latency of a request (send to reply), over every request of
every round; and the engine's decode calls and the batcher's sampler calls. The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE.parent)]  # the paired-timing helpers, wherever they sit
try:
    from pairs import alternate, load_average
except ImportError:
    from _pairs import alternate, load_average

QUESTIONS = [
    "What is the capital of France?",
    "Give me one tip for remembering names.",
    "Name a fruit that is yellow.",
    "Why is the sky blue?",
    "Write one sentence about the sea.",
    "What do bees make?",
    "How many legs does a spider have?",
    "Suggest a name for a cat.",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=16, help="concurrent requests per round")
    parser.add_argument("--max-tokens", type=int, default=32, help="max_tokens of each request")
    parser.add_argument("--mixed", action="store_true", help="max_tokens 1/4..all in turn")
    parser.add_argument("--pairs", type=int, default=3, help="rounds of each server, alternated")
    parser.add_argument("--slots", type=int, default=8, help="the engine's slots")
    parser.add_argument(
        "--max-len", type=int, default=0, help="the engine's max_len (0: the server's default)"
    )
    parser.add_argument("--source", default="packaged:smollm2", help="the model to serve")


class Mode:
    """One way of sending a round's requests; keeps every request's latency and tokens."""

    def __init__(self, client, requests: list[dict], concurrent: bool):
        self.client, self.requests, self.concurrent = client, requests, concurrent
        self.latencies: list[float] = []
        self.tokens: list[int] = []
        self.rounds_s: list[float] = []

    def _one(self, request: dict) -> tuple[float, int]:
        t0 = time.perf_counter()
        reply = self.client.chat.completions.create(**request)
        return time.perf_counter() - t0, reply.usage.completion_tokens

    def __call__(self) -> None:
        t0 = time.perf_counter()
        if self.concurrent:
            with ThreadPoolExecutor(len(self.requests)) as pool:
                results = list(pool.map(self._one, self.requests))
        else:
            results = [self._one(r) for r in self.requests]
        self.rounds_s.append(time.perf_counter() - t0)
        self.latencies += [s for s, _ in results]
        self.tokens.append(sum(n for _, n in results))

    def summary(self) -> dict:
        lat = np.asarray(self.latencies)
        return {
            "tokens_per_s": round(sum(self.tokens) / sum(self.rounds_s), 2),
            "latency_p50_s": round(float(np.percentile(lat, 50)), 3),
            "latency_p99_s": round(float(np.percentile(lat, 99)), 3),
            "round_median_s": round(statistics.median(self.rounds_s), 3),
            "requests": len(self.latencies),
        }


def _requests(args) -> list[dict]:
    requests = []
    for i in range(args.clients):
        limit = args.max_tokens
        if args.mixed:
            limit = max(1, args.max_tokens * (i % 4 + 1) // 4)
        question = QUESTIONS[i % len(QUESTIONS)] + f" ({i})"
        requests.append(
            {
                "model": "bench",
                "messages": [{"role": "user", "content": question}],
                "temperature": 0,
                "max_tokens": limit,
            }
        )
    return requests


def main(args) -> dict:
    from openai import OpenAI

    from memjax.checkpoints import load_model
    from memjax.serving.background import ThreadedServer
    from memjax.serving.openai_app import ServerSettings

    load_before = load_average()
    model = load_model(args.source, param_dtype="float32")
    common = dict(model_name="bench", max_tokens=args.max_tokens, max_batch_rows=32)
    requests = _requests(args)
    engine_settings = ServerSettings(engine=True, slots=args.slots, max_len=args.max_len, **common)
    with (
        ThreadedServer(model, engine_settings) as on_engine,
        ThreadedServer(model, ServerSettings(engine=False, **common)) as lock_step,
    ):
        modes = {}
        for name, server in (("engine", on_engine), ("lock_step", lock_step)):
            client = OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=3600)
            modes[name] = Mode(client, requests, True)
            modes[name]()  # warm-up: compiles every shape the round meets
            modes[name].latencies, modes[name].tokens, modes[name].rounds_s = [], [], []
        before = on_engine.stats.calls, lock_step.stats.calls
        times = alternate(modes["engine"], modes["lock_step"], args.pairs)
        calls = on_engine.stats.calls - before[0], lock_step.stats.calls - before[1]
    summary = times.summary()
    return {
        "benchmark": "serving",
        "source": args.source,
        "clients": args.clients,
        "max_tokens": args.max_tokens,
        "mixed": args.mixed,
        "slots": args.slots,
        "engine_max_len": engine_settings.engine_max_len(),
        "engine": modes["engine"].summary(),
        "lock_step": modes["lock_step"].summary(),
        "ratio_lock_step_over_engine": summary["ratio"],
        "ratio_min": summary["ratio_min"],
        "ratio_max": summary["ratio_max"],
        "pairs": summary["pairs"],
        "engine_decode_calls": calls[0],
        "lock_step_sampler_calls": calls[1],
        "load_before": load_before,
        "load_after": load_average(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    print(json.dumps(main(parser.parse_args())))
