"""The environment protocol: what Memory-R1, MemSearcher and the toy tasks implement.

An environment turns one dataset example into an episode of one or more model turns:

    state, prompt = env.reset(example)            # token ids of the first context
    # the rollout loop samples a completion for `prompt` ...
    state, result = env.step(state, completion, stop_reason)

and `result` (a `StepResult`) says what happens next:

    done=True, reward=r          the episode ends; r is its outcome reward
    observation=[ids]            a tool result appended to the *same* context (Search-R1, ReAct);
                                 the model continues after it. Never trainable.
    next_context=[ids]           the current context closes (it becomes one training row) and a
                                 fresh one starts from these ids (MemSearcher rebuilds its context
                                 from question + memory each turn: multi-context GRPO).

Only tokens the model generated are trainable; prompts, observations and rebuilt contexts are
masked out of the loss. A trajectory's contexts all get that trajectory's advantage.

Environments that hold state across episodes (memory banks) expose it for checkpoints with
`checkpoint_state` / `restore_state` (JSON-able) or `save_dir` / `load_dir` (a folder of files).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


@dataclasses.dataclass
class StepResult:
    done: bool
    reward: float = 0.0  # read when done
    observation: list[int] | None = None  # appended to the current context, not trainable
    next_context: list[int] | None = None  # closes the context and starts this one
    info: dict[str, float] = dataclasses.field(default_factory=dict)  # summed into metrics


class Environment:
    """Base class with the optional parts filled in; subclasses implement reset and step."""

    max_turns: int = 1  # the rollout loop ends an episode after this many model turns

    def reset(self, example: Any) -> tuple[Any, list[int]]:
        """(episode state, token ids of the first context) for one example."""
        raise NotImplementedError

    def step(self, state: Any, completion: list[int], stop_reason: str) -> tuple[Any, StepResult]:
        """Consumes the model's completion (token ids, EOS excluded) of the current turn."""
        raise NotImplementedError

    def truncated_reward(self, state: Any) -> float:
        """The reward of an episode cut off at max_turns without finishing (default 0)."""
        del state
        return 0.0

    # ---------------------------------------------------------------- checkpointed state

    def checkpoint_state(self) -> dict | None:
        """JSON-able state saved with every checkpoint (None: nothing to save)."""
        return None

    def restore_state(self, state: dict) -> None:
        del state

    def save_dir(self, path: Path) -> None:
        """Writes large state (memory banks, indexes) as files under `path`."""
        del path

    def load_dir(self, path: Path) -> None:
        del path

    has_dir_state: bool = False  # set True when save_dir/load_dir are implemented


__all__ = ["Environment", "StepResult"]
