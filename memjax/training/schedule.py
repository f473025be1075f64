"""When a run evaluates, saves and plots: one schedule, so the checkpoint policy and the eval
schedule cannot disagree.

    loop = LoopConfig(num_steps=15, eval_every=10, checkpoint_every=0, keep_best=1)
    policy = CheckpointPolicy(loop, has_eval=True)
    policy.evaluates(10), policy.evaluates(15)   # True, True: the last step is always evaluated
    policy.saves(10), policy.saves(15)           # True, True: every evaluated step is saved

Rules (all derived here, nowhere else):
  - the last step is always saved; so is every `checkpoint_every`-th step;
  - with eval data and `eval_every > 0`, every `eval_every`-th step and the last step are
    evaluated (and with `eval_before` the starting weights, as step 0, before the first step), and when `keep_best > 0` every evaluated step is also saved, with its eval
    result as the checkpoint's metric;
  - a save without an eval result carries no metric: the last-N policy keeps or drops it, the
    best-K policy never ranks it (so a step without an eval cannot crash the ranking);
  - without an eval schedule, `keep_best` has nothing to rank and is 0;
  - `export_from="best"` returns (and a job exports) the weights of the best-ranked evaluated step
    instead of the last step's: RL on a small model can peak before its last step, and the
    validation split is what says where.
"""

from __future__ import annotations

import dataclasses

from memjax.training.sections import require

EXPORTS = ("last", "best")  # which step's weights a run returns


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """The step loop's fields (top level of a trainer section)."""

    num_steps: int = 1
    seed: int = 0
    eval_every: int = 0  # 0: no periodic evaluation
    # Also evaluate the starting weights (recorded as step 0) before the first step: the
    # point a run's later evaluations are read against. Never a checkpoint, never exported.
    eval_before: bool = False
    checkpoint_every: int = 0  # 0: only the last step (and evaluated steps under keep_best)
    plot_every: int = 5  # 0: only at the end
    keep_last: int = 2
    keep_best: int = 1  # checkpoints ranked by the eval metric (needs an eval schedule)
    stop_after: int | None = None  # tests: stop before this step without a final save
    export_from: str = "last"  # "last" | "best": the weights of the last or best-ranked step

    FIELDS = (
        "num_steps",
        "seed",
        "eval_every",
        "eval_before",
        "checkpoint_every",
        "plot_every",
        "keep_last",
        "keep_best",
        "stop_after",
        "export_from",
    )

    def validate(self, path: str) -> LoopConfig:
        require(self.num_steps >= 1, f"{path}.num_steps", self.num_steps, "must be >= 1")
        for name in ("eval_every", "checkpoint_every", "plot_every", "keep_best"):
            v = getattr(self, name)
            require(v >= 0, f"{path}.{name}", v, "must be >= 0 (0 turns it off)")
        require(self.keep_last >= 1, f"{path}.keep_last", self.keep_last, "must be >= 1")
        if self.stop_after is not None:
            require(self.stop_after >= 0, f"{path}.stop_after", self.stop_after, "must be >= 0")
        require(
            self.export_from in EXPORTS,
            f"{path}.export_from",
            self.export_from,
            f"choose from {EXPORTS}",
        )
        if self.export_from == "best":
            for name in ("eval_every", "keep_best"):
                v = getattr(self, name)
                require(
                    v >= 1, f"{path}.{name}", v, "export_from='best' ranks evaluated steps: >= 1"
                )
        return self


class CheckpointPolicy:
    """Which steps evaluate and save; `has_eval` says whether the run has eval data at all."""

    def __init__(self, loop: LoopConfig, has_eval: bool):
        self.loop = loop
        self.eval_on = bool(has_eval) and loop.eval_every > 0
        self.keep_best = loop.keep_best if self.eval_on else 0
        self.keep_last = loop.keep_last
        # Without eval data nothing is ranked, and the last step is what a run returns.
        self.exports_best = loop.export_from == "best" and self.keep_best > 0

    def _last(self, step: int) -> bool:
        return step == self.loop.num_steps

    def evaluates(self, step: int) -> bool:
        """Step counts from 1 (the step just completed)."""
        return self.eval_on and (step % self.loop.eval_every == 0 or self._last(step))

    def evaluates_before(self, start_step: int, evaluated: list[dict]) -> bool:
        """Whether to evaluate the starting weights now: asked for, at step 0 (a run resumed
        from a checkpoint has passed it), and not already recorded."""
        wanted = self.eval_on and self.loop.eval_before and start_step == 0
        return wanted and not any(e["step"] == 0 for e in evaluated)

    def saves(self, step: int) -> bool:
        every = self.loop.checkpoint_every
        if self._last(step) or (every and step % every == 0):
            return True
        return self.keep_best > 0 and self.evaluates(step)

    def plots(self, step: int) -> bool:
        every = self.loop.plot_every
        return self._last(step) or bool(every and step % every == 0)


__all__ = ["LoopConfig", "CheckpointPolicy", "EXPORTS"]
