"""EM / F1 per dataset as Markdown and JSON tables (scores in percent, as the papers print)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from memjax.eval.qa_metrics import DatasetScore


def to_json(table: Mapping[str, Sequence[DatasetScore]]) -> str:
    return json.dumps({agent: [asdict(r) for r in rows] for agent, rows in table.items()}, indent=2)


def to_markdown(table: Mapping[str, Sequence[DatasetScore]]) -> str:
    """One row per agent and dataset: n, EM, F1 and the answered fraction, in percent."""
    lines = ["| agent | dataset | n | EM | F1 | answered |", "|---|---|---:|---:|---:|---:|"]
    for agent, rows in table.items():
        for r in rows:
            lines.append(
                f"| {agent} | {r.dataset} | {r.count} | {100 * r.em:.1f} | {100 * r.f1:.1f} "
                f"| {100 * r.answered:.1f} |"
            )
    return "\n".join(lines) + "\n"
