"""How search agents behave, beside how well they score: the share of episodes that searched at
least once, ended in a valid format and gave an answer, searches per episode, and why episodes
ended (with the call that ended them, where an agent has several: `no_eos@memory` is a
MemSearcher memory update that ran out of tokens).

These are the numbers that say whether a policy does the agent's job at all (a cold-start model
that never searches scores 0 for a reason no EM table shows).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Behaviour:
    agent: str
    episodes: int
    searched: float  # fraction with >= 1 search
    format_valid: float
    answered: float  # fraction with a parsed final answer
    searches_per_episode: float
    stop_reasons: dict[str, int] = field(default_factory=dict)  # "reason[@call]" -> episodes


def behaviour(agent: str, results: Sequence) -> Behaviour:
    """`results`: EpisodeResult-like objects (searches, format_valid, answer, stop_reason and
    optionally stopped_in)."""
    n = len(results)
    share = lambda pred: sum(1 for r in results if pred(r)) / max(n, 1)
    return Behaviour(
        agent=agent,
        episodes=n,
        searched=share(lambda r: len(r.searches) > 0),
        format_valid=share(lambda r: r.format_valid),
        answered=share(lambda r: r.answer is not None),
        searches_per_episode=sum(len(r.searches) for r in results) / max(n, 1),
        stop_reasons=dict(sorted(Counter(map(_stop_key, results)).items())),
    )


def _stop_key(result) -> str:
    call = getattr(result, "stopped_in", "")
    return f"{result.stop_reason}@{call}" if call else result.stop_reason


def to_markdown(rows: Sequence[Behaviour]) -> str:
    lines = [
        "| agent | episodes | searched | format valid | answered | searches / episode | stops |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for b in rows:
        stops = ", ".join(f"{k} {v}" for k, v in b.stop_reasons.items())
        lines.append(
            f"| {b.agent} | {b.episodes} | {b.searched:.1%} | {b.format_valid:.1%} | "
            f"{b.answered:.1%} | {b.searches_per_episode:.2f} | {stops} |"
        )
    return "\n".join(lines) + "\n"


def to_json(rows: Sequence[Behaviour]) -> str:
    return json.dumps([asdict(b) for b in rows], indent=1)


__all__ = ["Behaviour", "behaviour", "to_markdown", "to_json"]
