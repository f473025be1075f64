"""Two evaluations of the same questions, compared question by question.

    diff = paired_difference(before, after)     # {uid: score} each, e.g. EM of SFT and GRPO
    diff.mean, diff.se, diff.n, diff.gained, diff.lost
    mean, se, n = mean_se(values)               # one run's mean and its standard error

Both runs answer the same held-out questions, so the question's own difficulty cancels in the
per-question difference: its standard error (the sample standard deviation of the differences
over sqrt(n)) is the one to hold a gain against, and is smaller than either run's own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence


def mean_se(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean, standard error, n); the standard error of fewer than 2 values is 0."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0, n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n), n


@dataclasses.dataclass(frozen=True)
class PairedDifference:
    mean: float  # mean of after - before over the shared questions
    se: float  # standard error of that mean (0 for fewer than 2 questions)
    n: int  # questions both runs scored
    gained: int  # questions whose score rose
    lost: int  # questions whose score fell
    only_before: int  # questions one run scored and the other did not (not compared)
    only_after: int

    @property
    def z(self) -> float:
        """The difference in standard errors (inf for a nonzero difference with se 0)."""
        if self.se > 0:
            return self.mean / self.se
        return 0.0 if self.mean == 0 else math.copysign(math.inf, self.mean)


def paired_difference(before: Mapping[str, float], after: Mapping[str, float]) -> PairedDifference:
    shared = sorted(set(before) & set(after))
    diffs = [float(after[u]) - float(before[u]) for u in shared]
    mean, se, n = mean_se(diffs)
    return PairedDifference(
        mean=mean,
        se=se,
        n=n,
        gained=sum(d > 0 for d in diffs),
        lost=sum(d < 0 for d in diffs),
        only_before=len(set(before) - set(after)),
        only_after=len(set(after) - set(before)),
    )
