"""LoCoMo reports shaped like Memory-R1's Table 1, in Markdown and JSON.

One row per category (Table 1's column order by default: Single Hop, Multi-Hop, Open Domain,
Temporal) and an Overall that is the *question-weighted* mean over the included questions (how
Memory-R1 and Mem0 compute it; the mean of the columns would differ). Results in categories not
listed (category 5 under the Mem0 protocol) are left out and counted. Every report states the
category-name mapping and the split its questions come from (with every part's size), and
carries p50/p95 latencies per role and memory tokens per conversation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

import numpy as np

from memjax.data.categories import CATEGORY_MAPPING_NOTE, TABLE1_ORDER, category_name
from memjax.data.splits import SplitSummary

METRIC_LABELS = {"f1": "F1", "bleu1": "B1", "j": "J", "em": "EM", "official_f1": "F1 (official)"}
TABLE1_COLUMN_TITLES = {
    1: "Single Hop",
    2: "Temporal",
    3: "Multi-Hop",
    4: "Open Domain",
    5: "Adversarial",
}


@dataclasses.dataclass(frozen=True)
class QuestionResult:
    conversation_id: str
    qa_index: int
    category: int
    scores: Mapping[str, float]  # metric -> value in [0, 1]


@dataclasses.dataclass(frozen=True)
class CategoryRow:
    category: int | None  # None for the overall row
    name: str
    count: int
    means: dict[str, float]  # metric -> mean in [0, 1]


@dataclasses.dataclass(frozen=True)
class LatencyStats:
    count: int
    p50_s: float
    p95_s: float
    mean_s: float


@dataclasses.dataclass(frozen=True)
class Report:
    method: str
    metrics: tuple[str, ...]
    rows: tuple[CategoryRow, ...]  # categories in order, then overall
    excluded: dict[int, int]  # category -> questions left out of the table
    latency: dict[str, LatencyStats]  # role ("manager", "answer", "search") -> stats
    memory_tokens: dict[str, int]  # conversation id -> tokens in its memory bank(s)
    counters: dict[str, dict[str, int]]  # e.g. {"manager_parse": {"unknown_id": 3}}
    category_note: str = CATEGORY_MAPPING_NOTE
    split: SplitSummary | None = None  # the questions' split and the size of every part
    judge: str | None = None  # the judge's model and where it ran, when a judge scored J

    @property
    def overall(self) -> CategoryRow:
        return self.rows[-1]

    @property
    def mean_memory_tokens(self) -> float | None:
        if not self.memory_tokens:
            return None
        return float(np.mean(list(self.memory_tokens.values())))

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["mean_memory_tokens"] = self.mean_memory_tokens
        out["excluded"] = {str(k): v for k, v in self.excluded.items()}
        return out

    def to_json_str(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    def to_markdown(self) -> str:
        metric_head = "/".join(METRIC_LABELS.get(m, m) for m in self.metrics)
        cells = ["Method"] + [
            f"{TABLE1_COLUMN_TITLES.get(r.category, r.name) if r.category else 'Overall'} {metric_head}"
            for r in self.rows
        ]
        values = [self.method] + [
            "/".join(f"{100 * r.means[m]:.2f}" for m in self.metrics) for r in self.rows
        ]
        lines = [
            "| " + " | ".join(cells) + " |",
            "|" + "---|" * len(cells),
            "| " + " | ".join(values) + " |",
            "",
            f"Questions: {self.overall.count} ("
            + ", ".join(f"{r.name} {r.count}" for r in self.rows[:-1])
            + "); overall is question-weighted. Scores are percentages.",
            self.category_note,
        ]
        if self.split is not None:
            lines.append(self.split.line())
        if self.judge:
            lines.append(f"Judge: {self.judge}.")
        if self.excluded:
            lines.append(
                "Left out: "
                + ", ".join(f"{category_name(c)} {n}" for c, n in sorted(self.excluded.items()))
                + "."
            )
        if self.latency:
            lines.append(
                "Latency (s): "
                + "; ".join(
                    f"{role} p50 {s.p50_s:.3f}, p95 {s.p95_s:.3f} (n={s.count})"
                    for role, s in self.latency.items()
                )
                + "."
            )
        if self.memory_tokens:
            lines.append(
                f"Memory tokens per conversation: mean {self.mean_memory_tokens:.1f} ("
                + ", ".join(f"{k} {v}" for k, v in self.memory_tokens.items())
                + ")."
            )
        for name, counts in self.counters.items():
            lines.append(
                f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "."
            )
        return "\n".join(lines) + "\n"


def latency_stats(seconds: Sequence[float]) -> LatencyStats:
    values = np.asarray(seconds, dtype=np.float64)  # [N]
    if values.size == 0:
        raise ValueError("latency_stats: no measurements")
    p50, p95 = np.percentile(values, [50, 95])
    return LatencyStats(int(values.size), float(p50), float(p95), float(values.mean()))


def build_report(
    results: Sequence[QuestionResult],
    *,
    method: str,
    metrics: Sequence[str] = ("f1", "bleu1", "j"),
    categories: Sequence[int] = TABLE1_ORDER,
    latencies: Mapping[str, Sequence[float]] | None = None,
    memory_tokens: Mapping[str, int] | None = None,
    counters: Mapping[str, Mapping[str, int]] | None = None,
    split: SplitSummary | None = None,
    judge: str | None = None,
) -> Report:
    """Per-category means and the question-weighted overall over `categories`."""
    included = [r for r in results if r.category in categories]
    if not included:
        raise ValueError(f"build_report: no results in categories {tuple(categories)}")
    for r in included:
        missing = [m for m in metrics if m not in r.scores]
        if missing:
            raise ValueError(
                f"build_report: result {r.conversation_id}/{r.qa_index} lacks metrics {missing}"
            )

    def row(category: int | None, items: list[QuestionResult]) -> CategoryRow:
        means = {m: float(np.mean([r.scores[m] for r in items])) if items else 0.0 for m in metrics}
        name = category_name(category) if category is not None else "overall"
        return CategoryRow(category, name, len(items), means)

    rows = [row(c, [r for r in included if r.category == c]) for c in categories]
    rows.append(row(None, included))
    excluded: dict[int, int] = {}
    for r in results:
        if r.category not in categories:
            excluded[r.category] = excluded.get(r.category, 0) + 1
    return Report(
        method=method,
        metrics=tuple(metrics),
        rows=tuple(rows),
        excluded=excluded,
        latency={k: latency_stats(v) for k, v in (latencies or {}).items()},
        memory_tokens=dict(memory_tokens or {}),
        counters={k: dict(v) for k, v in (counters or {}).items()},
        split=split,
        judge=judge,
    )
