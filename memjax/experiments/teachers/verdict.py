"""Rejection sampling's bookkeeping: a replayed trajectory's verdict, and counts per role.

A trajectory is kept only when its replay through the real environment earns the role's full
reward; every other one is counted under the first reason it failed (a prompt that differs
from what the agent would see, output the parser rejects, a reward below full, ...).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable

from memjax.experiments.teachers.trajectory import Trajectory

FULL_REWARD = 1.0  # every role's reward is at most 1 (EM, F1, or a check that all holds)


@dataclasses.dataclass(frozen=True)
class Verdict:
    reward: float
    reason: str = ""  # "" when the trajectory earns the full reward

    @property
    def kept(self) -> bool:
        return not self.reason and self.reward >= FULL_REWARD


def verdict_from_reward(reward: float, why_not: str) -> Verdict:
    """Full reward: kept; otherwise rejected with `why_not` (or a generic reason)."""
    if reward >= FULL_REWARD:
        return Verdict(reward)
    return Verdict(reward, why_not or "reward_below_full")


@dataclasses.dataclass
class RoleTally:
    offered: int = 0
    kept: int = 0
    reasons: Counter = dataclasses.field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {
            "offered": self.offered,
            "kept": self.kept,
            "keep_rate": round(self.kept / self.offered, 4) if self.offered else 0.0,
            "reject_reasons": dict(self.reasons.most_common()),
        }


@dataclasses.dataclass
class RejectionTally:
    roles: dict[str, RoleTally] = dataclasses.field(default_factory=dict)

    def add(self, role: str, verdict: Verdict) -> None:
        tally = self.roles.setdefault(role, RoleTally())
        tally.offered += 1
        if verdict.kept:
            tally.kept += 1
        else:
            tally.reasons[verdict.reason] += 1

    def as_dict(self) -> dict:
        return {role: tally.as_dict() for role, tally in self.roles.items()}


def keep_full_reward(
    trajectories: Iterable[Trajectory],
    replay: Callable[[Trajectory], Verdict],
    tally: RejectionTally,
) -> list[Trajectory]:
    """Replays each trajectory; keeps those with the full reward (their `reward` set from the
    replay, not from what the teacher claimed)."""
    kept = []
    for trajectory in trajectories:
        verdict = replay(trajectory)
        tally.add(trajectory.role, verdict)
        if verdict.kept:
            trajectory.reward = verdict.reward
            kept.append(trajectory)
    return kept
