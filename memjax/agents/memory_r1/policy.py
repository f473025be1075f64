"""What Memory-R1's pipelines need from a model: chat messages in, completion texts out.

    policy: ChatPolicy = lambda batch: ["..." for messages in batch]
    timed = TimedPolicy(policy)               # records each batched call's wall time
    texts = timed([[{"role": "user", "content": "Hi"}], ...])

Memory construction, the manager's reward (a frozen answer agent) and evaluation all call a
policy with a *batch* of conversations so a whole test set advances in one generation call per
step. Scripted policies (tests), the memjax sampler (`sampler_policy`) and any other generator
fit the same type.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

Messages = Sequence[dict]
ChatPolicy = Callable[[Sequence[Messages]], list[str]]


class TimedPolicy:
    """Wraps a policy; every call's wall time is recorded once per item it served, so the
    p50/p95 over `seconds` is the latency an item waited (a batched call serves many)."""

    def __init__(self, policy: ChatPolicy, name: str = "policy"):
        self.policy = policy
        self.name = name
        self.seconds: list[float] = []  # one entry per item served
        self.calls = 0

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if not batch:
            return []
        t0 = time.perf_counter()
        out = list(self.policy(batch))
        dt = time.perf_counter() - t0
        if len(out) != len(batch):
            raise ValueError(f"{self.name}: {len(batch)} prompts gave {len(out)} completions")
        self.calls += 1
        self.seconds.extend([dt] * len(batch))
        return out


def chunked(policy: ChatPolicy, batch_size: int) -> ChatPolicy:
    """A policy that sends at most `batch_size` prompts per call (bounds device memory)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")

    def call(batch: Sequence[Messages]) -> list[str]:
        out: list[str] = []
        for i in range(0, len(batch), batch_size):
            out.extend(policy(batch[i : i + batch_size]))
        return out

    return call
