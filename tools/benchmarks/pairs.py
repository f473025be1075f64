"""Paired timing of memjax against a peer, robust to a machine whose load changes mid-run.

    times = alternate(run_memjax, run_peer, pairs=5)  # A B A B ...: one call of each per pair
    report = {**times.summary(), "load_before": before, "load_after": load_average()}

A ratio is taken within each pair (the peer's seconds over memjax's, so > 1 means memjax is
faster), and the report is the median of those per-pair ratios with their spread. A load that
comes and goes then hits both sides of the pairs it overlaps instead of one whole half of the
run, and a pair that it skews moves the median by at most one rank. `rotate` does the same for
more than two contenders, rotating their order every round.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable


def time_call(fn: Callable[[], object]) -> float:
    """Seconds one call of fn takes (fn must block until its work is done)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@dataclasses.dataclass(frozen=True)
class PairedTimes:
    """Seconds of each call of A (memjax) and B (the peer), pair by pair."""

    a_s: tuple[float, ...]
    b_s: tuple[float, ...]

    def ratios(self) -> list[float]:
        """B's seconds over A's seconds for each pair: A's speed relative to B's."""
        return [b / a for a, b in zip(self.a_s, self.b_s)]

    def summary(self, digits: int = 3) -> dict:
        """Median per-pair ratio, its min/max and quartiles, and each side's median seconds."""
        r = sorted(self.ratios())
        q1, _, q3 = statistics.quantiles(r, n=4, method="inclusive") if len(r) > 1 else r * 3
        out = {
            "ratio": statistics.median(r),
            "ratio_min": r[0],
            "ratio_max": r[-1],
            "ratio_q1": q1,
            "ratio_q3": q3,
            "pairs": len(r),
            "memjax_median_s": statistics.median(self.a_s),
            "peer_median_s": statistics.median(self.b_s),
        }
        return {k: v if isinstance(v, int) else round(v, digits) for k, v in out.items()}


def alternate(run_a: Callable[[], object], run_b: Callable[[], object], pairs: int) -> PairedTimes:
    """Times run_a, run_b, run_a, run_b, ... `pairs` times each (both already warmed up)."""
    if pairs < 1:
        raise ValueError(f"pairs={pairs} must be >= 1")
    a_s, b_s = [], []
    for _ in range(pairs):
        a_s.append(time_call(run_a))
        b_s.append(time_call(run_b))
    return PairedTimes(tuple(a_s), tuple(b_s))


def rotate(contenders: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each contender over `rounds` rounds; the order rotates every round
    (ABC, BCA, CAB, ...) so no contender always runs first or last."""
    names = list(contenders)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def paired_ratio(numerator: list[float], denominator: list[float]) -> dict[str, float]:
    """Median and spread of numerator[i] / denominator[i] over the rounds."""
    ratios = [a / b for a, b in zip(numerator, denominator)]
    return {
        "median": round(statistics.median(ratios), 3),
        "min": round(min(ratios), 3),
        "max": round(max(ratios), 3),
    }


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages now (what else was running on the machine)."""
    return [round(x, 2) for x in os.getloadavg()]


def format_summary(s: dict) -> str:
    """One line: median ratio [min..max], IQR, over N pairs."""
    return (
        f"ratio {s['ratio']:.3f} (median of {s['pairs']} pairs; min {s['ratio_min']:.3f}, "
        f"max {s['ratio_max']:.3f}, IQR {s['ratio_q1']:.3f}-{s['ratio_q3']:.3f})"
    )


__all__ = [
    "PairedTimes",
    "alternate",
    "format_summary",
    "load_average",
    "paired_ratio",
    "rotate",
    "time_call",
]
