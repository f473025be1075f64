"""Tokens per context at each turn: per-agent mean and peak tables (Markdown, JSON) and a plot.

MemSearcher's claim is that its context stays flat across turns while ReAct-style agents grow
linearly; the paper measures, for each turn, the token length of the whole context after that
turn (after the memory update for MemSearcher, after the tool response for the others).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from memjax.data.splits import SplitSummary


@dataclass(frozen=True)
class TurnStats:
    turn: int  # 1-based
    episodes: int  # how many episodes reached this turn
    mean: float
    peak: int


def turn_stats(per_episode: Sequence[Sequence[int]]) -> list[TurnStats]:
    """`per_episode[e][t]` is episode e's context tokens at turn t+1."""
    longest = max((len(counts) for counts in per_episode), default=0)
    rows = []
    for t in range(longest):
        values = [counts[t] for counts in per_episode if len(counts) > t]
        rows.append(TurnStats(t + 1, len(values), sum(values) / len(values), max(values)))
    return rows


def to_json(table: Mapping[str, Sequence[TurnStats]], split: SplitSummary | None = None) -> str:
    """{agent: rows}; with a split, {"split": ..., "turns": {agent: rows}}."""
    rows = {agent: [asdict(r) for r in rows] for agent, rows in table.items()}
    return json.dumps(
        rows if split is None else {"split": split.to_json(), "turns": rows}, indent=2
    )


def to_markdown(table: Mapping[str, Sequence[TurnStats]], split: SplitSummary | None = None) -> str:
    """One row per turn, a mean / peak column pair per agent (n = episodes reaching the turn);
    the split's line under the table when given."""
    agents = list(table)
    longest = max((len(rows) for rows in table.values()), default=0)
    header = "| turn | " + " | ".join(f"{a} mean | {a} peak | {a} n" for a in agents) + " |"
    rule = "|---:|" + "---:|---:|---:|" * len(agents)
    lines = [header, rule]
    for t in range(longest):
        cells = []
        for agent in agents:
            rows = table[agent]
            if t < len(rows):
                cells += [f"{rows[t].mean:.1f}", str(rows[t].peak), str(rows[t].episodes)]
            else:
                cells += ["", "", "0"]
        lines.append(f"| {t + 1} | " + " | ".join(cells) + " |")
    if split is not None:
        lines += ["", split.line()]
    return "\n".join(lines) + "\n"


def plot(table: Mapping[str, Sequence[TurnStats]], path: str | Path, title: str = "") -> Path:
    """Mean context tokens against turn (peak as a dashed line of the same colour), as PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for agent, rows in table.items():
        turns = [r.turn for r in rows]
        (line,) = ax.plot(turns, [r.mean for r in rows], marker="o", label=f"{agent} (mean)")
        ax.plot(turns, [r.peak for r in rows], linestyle="--", color=line.get_color(), alpha=0.6)
    ax.set_xlabel("turn")
    ax.set_ylabel("context tokens")
    ax.set_title(title or "Context tokens per turn (dashed: peak)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_reports(
    table: Mapping[str, Sequence[TurnStats]],
    directory: str | Path,
    split: SplitSummary | None = None,
) -> dict:
    """tokens_per_turn.{md,json,png} in `directory`; returns their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    md, js = directory / "tokens_per_turn.md", directory / "tokens_per_turn.json"
    md.write_text(to_markdown(table, split))
    js.write_text(to_json(table, split))
    png = plot(table, directory / "tokens_per_turn.png")
    return {"markdown": md, "json": js, "plot": png}
