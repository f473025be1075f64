"""Evaluation summary for search agents: EM / F1 per dataset and tokens per turn per agent,
written as qa_scores.{md,json} and tokens_per_turn.{md,json,png}."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memjax.agents.episode import EpisodeResult
from memjax.agents.transcript import ChatFormat, turn_token_counts
from memjax.data.splits import SplitSummary
from memjax.eval import behaviour_report, qa_report, token_report
from memjax.eval.qa_metrics import (
    DatasetScore,
    Prediction,
    em_score,
    f1_score,
    score_by_dataset,
)


@dataclass(frozen=True)
class EvaluatedEpisode:
    agent: str  # "memsearcher", "search_r1", "react", "rag"
    dataset: str
    golden_answers: tuple[str, ...]
    result: EpisodeResult


@dataclass(frozen=True)
class SearchAgentReport:
    scores: dict[str, list[DatasetScore]]
    turns: dict[str, list[token_report.TurnStats]]
    behaviour: list[behaviour_report.Behaviour] = ()


def summarize(episodes: Sequence[EvaluatedEpisode], fmt: ChatFormat) -> SearchAgentReport:
    predictions: dict[str, list[Prediction]] = {}
    counts: dict[str, list[list[int]]] = {}
    for e in episodes:
        predictions.setdefault(e.agent, []).append(
            Prediction(e.dataset, e.result.answer, tuple(e.golden_answers))
        )
        counts.setdefault(e.agent, []).append(turn_token_counts(e.result.turn_contexts, fmt))
    results: dict[str, list[EpisodeResult]] = {}
    for e in episodes:
        results.setdefault(e.agent, []).append(e.result)
    return SearchAgentReport(
        scores={agent: score_by_dataset(p) for agent, p in predictions.items()},
        turns={agent: token_report.turn_stats(c) for agent, c in counts.items()},
        behaviour=[behaviour_report.behaviour(a, r) for a, r in results.items()],
    )


def write(
    report: SearchAgentReport, directory: str | Path, split: SplitSummary | None = None
) -> dict[str, Path]:
    """Both tables in `directory`, each naming `split` (the questions' split and sizes)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = token_report.write_reports(report.turns, directory, split)
    paths["scores_markdown"] = directory / "qa_scores.md"
    paths["scores_json"] = directory / "qa_scores.json"
    paths["scores_markdown"].write_text(qa_report.to_markdown(report.scores, split))
    paths["scores_json"].write_text(qa_report.to_json(report.scores, split))
    paths["behaviour_markdown"] = directory / "behaviour.md"
    paths["behaviour_json"] = directory / "behaviour.json"
    paths["behaviour_markdown"].write_text(behaviour_report.to_markdown(report.behaviour))
    paths["behaviour_json"].write_text(behaviour_report.to_json(report.behaviour))
    return paths


def question_scores(rows: Sequence[dict], agent: str = "memsearcher") -> dict[str, dict]:
    """question -> EM, F1 and format validity (0 or 1) of one agent's episodes, from the rows of
    a `memsearcher.eval` predictions.jsonl (one per agent and question): what a paired
    comparison of two evaluations of the same questions holds side by side."""
    return {
        row["question"]: {
            "em": em_score(row["answer"], row["golden_answers"]),
            "f1": f1_score(row["answer"], row["golden_answers"]),
            "format_valid": float(bool(row.get("format_valid"))),
        }
        for row in rows
        if row["agent"] == agent
    }
