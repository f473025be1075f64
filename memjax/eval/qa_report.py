"""EM / F1 per dataset as Markdown and JSON tables (scores in percent, as the papers print)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from memjax.data.splits import SplitSummary
from memjax.eval.qa_metrics import DatasetScore


def to_json(table: Mapping[str, Sequence[DatasetScore]], split: SplitSummary | None = None) -> str:
    """{agent: rows}; with a split, {"split": ..., "scores": {agent: rows}}."""
    rows = {agent: [asdict(r) for r in rows] for agent, rows in table.items()}
    return json.dumps(
        rows if split is None else {"split": split.to_json(), "scores": rows}, indent=2
    )


def to_markdown(
    table: Mapping[str, Sequence[DatasetScore]], split: SplitSummary | None = None
) -> str:
    """One row per agent and dataset: n, EM, F1 and the answered fraction, in percent; the
    split's line under the table when given."""
    lines = ["| agent | dataset | n | EM | F1 | answered |", "|---|---|---:|---:|---:|---:|"]
    for agent, rows in table.items():
        for r in rows:
            lines.append(
                f"| {agent} | {r.dataset} | {r.count} | {100 * r.em:.1f} | {100 * r.f1:.1f} "
                f"| {100 * r.answered:.1f} |"
            )
    if split is not None:
        lines += ["", split.line()]
    return "\n".join(lines) + "\n"
