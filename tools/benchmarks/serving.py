"""memjax's OpenAI-compatible server: 16 concurrent clients against one request at a time.

    python tools/bench.py serving [--clients 16] [--max-tokens 32] [--pairs 3]

The packaged SmolLM2 behind the server on 127.0.0.1 (real uvicorn, real `openai` clients).
One round sends `--clients` chat requests (different questions, greedy, exactly the same
requests in both modes) either all at once from as many client threads, which the server
gathers into shared sampler calls, or one after another, each sent when the last one's reply
came back. The two modes alternate round by round (tools' paired timing) after one warm-up
round of each (compiles); the ratio is the sequential round's seconds over the concurrent one's.
Reported per mode: completion tokens/s over the round's wall time and p50/p99 latency of a
request (send to reply), over every request of every round; and the server's sampler calls.
The last line is one JSON object.
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
    parser.add_argument("--pairs", type=int, default=3, help="rounds of each mode, alternated")
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


def main(args) -> dict:
    from openai import OpenAI

    from memjax.checkpoints import load_model
    from memjax.serving.background import ThreadedServer
    from memjax.serving.openai_app import ServerSettings

    load_before = load_average()
    model = load_model(args.source, param_dtype="float32")
    settings = ServerSettings(model_name="bench", max_tokens=args.max_tokens, max_batch_rows=32)
    requests = [
        {
            "model": "bench",
            "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)] + f" ({i})"}],
            "temperature": 0,
            "max_tokens": args.max_tokens,
        }
        for i in range(args.clients)
    ]
    with ThreadedServer(model, settings) as server:
        client = OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=3600)
        concurrent, sequential = Mode(client, requests, True), Mode(client, requests, False)
        concurrent(), sequential()  # warm-up: compiles every shape either mode meets
        for mode in (concurrent, sequential):
            mode.latencies, mode.tokens, mode.rounds_s = [], [], []
        calls_before = server.stats.calls
        times = alternate(concurrent, sequential, args.pairs)
        calls = server.stats.calls - calls_before
    summary = times.summary()
    return {
        "benchmark": "serving",
        "source": args.source,
        "clients": args.clients,
        "max_tokens": args.max_tokens,
        "concurrent": concurrent.summary(),
        "sequential": sequential.summary(),
        "ratio_sequential_over_concurrent": summary["ratio"],
        "ratio_min": summary["ratio_min"],
        "ratio_max": summary["ratio_max"],
        "pairs": summary["pairs"],
        "sampler_calls": calls,
        "load_before": load_before,
        "load_after": load_average(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    print(json.dumps(main(parser.parse_args())))
