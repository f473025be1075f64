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

from tqdm import tqdm

from memjax.agents.memory_r1.call_cache import CallCache

Messages = Sequence[dict]
ChatPolicy = Callable[[Sequence[Messages]], list[str]]


class TimedPolicy:
    """Wraps a policy, sending at most `batch_size` prompts per call; each call's wall time is
    recorded once per item it served, so the p50/p95 over `seconds` is the latency an item
    waited for its batched generation call (not for the whole phase). A request that takes
    more than one call shows a progress bar (`progress=False`: none): extracting a LoCoMo
    conversation's facts is tens of calls on a CPU. With a `cache` (call_cache.CallCache) each
    finished call is kept on disk and read back when the same call comes again, so a stopped
    evaluation resumes at its last finished call (for a deterministic, greedy policy)."""

    def __init__(
        self,
        policy: ChatPolicy,
        name: str = "policy",
        batch_size: int | None = None,
        progress: bool = True,
        cache: CallCache | None = None,
    ):
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.policy = policy
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        self.cache = cache
        self.seconds: list[float] = []  # one entry per item served
        self.calls = 0

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        step = self.batch_size or max(len(batch), 1)
        # Similar lengths share a call (less padding, fewer prompt buckets); answers come back
        # in the caller's order.
        order = sorted(range(len(batch)), key=lambda i: _chars(batch[i]))
        out: list[str] = [""] * len(batch)
        starts = range(0, len(order), step)
        quiet = not self.progress or len(starts) <= 1
        for start in tqdm(starts, desc=self.name, unit="call", disable=quiet):
            rows = order[start : start + step]
            chunk = [batch[i] for i in rows]
            texts, dt = self._call(chunk)
            self.calls += 1
            self.seconds.extend([dt] * len(chunk))
            for i, text in zip(rows, texts):
                out[i] = text
        return out

    def _call(self, chunk: Sequence[Messages]) -> tuple[list[str], float]:
        """One batched call's completions and wall time (read back when the cache holds it)."""
        cached = self.cache.load(chunk) if self.cache else None
        if cached is not None:
            return cached.texts, cached.seconds
        t0 = time.perf_counter()
        texts = list(self.policy(chunk))
        dt = time.perf_counter() - t0
        if len(texts) != len(chunk):
            raise ValueError(f"{self.name}: {len(chunk)} prompts gave {len(texts)} completions")
        if self.cache:
            self.cache.save(chunk, texts, dt)
        return texts, dt


def _chars(messages: Messages) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages)
