"""Benchmark: the retrieval server's requests/s over real HTTP on 127.0.0.1.

    python tools/bench_server.py [--seconds 10] [--clients 8] [--docs 5000]

The server runs in this process on an ephemeral port over an exact index of `--docs` passages
with a bag-of-words numpy embedder, so the figure is the server's own cost (HTTP, JSON,
threads), not the encoder's. `--clients` threads each keep one connection open and post, in
turn, a Search-R1 `/retrieve` (1 query, topk 3), a MemSearcher `/search` (top_n 3) and a
64-query `/retrieve` batch. Prints requests/s and the median and p90 latency per kind of
request; the last line is one JSON object with every figure. Run it on two checkouts
(PYTHONPATH=...) to compare server versions on the same machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memjax.memory.corpus import Retriever  # noqa: E402
from memjax.memory.index import ExactIndex  # noqa: E402
from memjax.memory.server import RetrievalService, make_server  # noqa: E402

DIM = 256


class HashedWords:
    """Unit bag-of-words vectors: each word hashed to one of DIM axes (stable across runs)."""

    dim = DIM

    def encode(self, texts, kind="query"):
        out = np.zeros((len(texts), DIM), np.float32)  # [N, D]
        for row, text in zip(out, texts):
            for word in text.split():
                row[sum(word.encode()) * 2654435761 % DIM] += 1.0
            row[0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def corpus(n: int) -> dict[str, dict]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    docs = {}
    for i in range(n):
        text = " ".join(rng.choice(words, 60))
        docs[str(i)] = {"id": str(i), "contents": f'"Title {i}"\n{text}'}
    return docs


REQUESTS = [
    ("retrieve_1", "/retrieve", lambda q: {"queries": [q], "topk": 3, "return_scores": True}),
    ("search_1", "/search", lambda q: {"query": q, "top_n": 3}),
    ("retrieve_64", "/retrieve", lambda q: {"queries": [q] * 64, "topk": 3}),
]


def client(address, stop: threading.Event, times: dict[str, list[float]], seed: int) -> None:
    conn = http.client.HTTPConnection(*address, timeout=60)
    rng = np.random.default_rng(seed)
    i = 0
    while not stop.is_set():
        name, path, body = REQUESTS[i % len(REQUESTS)]
        data = json.dumps(body(" ".join(f"w{j}" for j in rng.integers(0, 2000, 8)))).encode()
        t0 = time.perf_counter()
        conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status}: {payload[:200]!r}")
        times[name].append(time.perf_counter() - t0)
        i += 1
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--docs", type=int, default=5000)
    args = parser.parse_args()

    embedder = HashedWords()
    docs = corpus(args.docs)
    index = ExactIndex(DIM)
    index.upsert(list(docs), embedder.encode([d["contents"] for d in docs.values()]))
    server = make_server(RetrievalService(Retriever(index, docs, embedder)), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = server.server_address[:2]
    time.sleep(0.5)

    times = [{name: [] for name, _, _ in REQUESTS} for _ in range(args.clients)]
    stop = threading.Event()
    load_before = os.getloadavg()[0]
    threads = [
        threading.Thread(target=client, args=(address, stop, times[c], c))
        for c in range(args.clients)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    server.shutdown()
    server.server_close()

    result = {"clients": args.clients, "docs": args.docs, "seconds": round(wall, 2)}
    total = 0
    for name, _, _ in REQUESTS:
        lat = np.array([x for per_client in times for x in per_client[name]])
        total += len(lat)
        result[name] = {
            "requests": len(lat),
            "p50_ms": round(float(np.median(lat)) * 1e3, 2),
            "p90_ms": round(float(np.percentile(lat, 90)) * 1e3, 2),
        }
        print(
            f"{name:12s} {len(lat):6d} requests  p50 {result[name]['p50_ms']:7.2f} ms  "
            f"p90 {result[name]['p90_ms']:7.2f} ms"
        )
    result["requests_per_s"] = round(total / wall, 1)
    result["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"{result['requests_per_s']} requests/s with {args.clients} clients")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
