"""Open-domain QA metrics: SQuAD-style normalisation, exact match and token F1.

These are the metrics of MemSearcher (EM for evaluation, F1 inside its reward) and Search-R1
(EM reward). F1 follows the HotpotQA variant: when the prediction or the gold answer is
yes / no / noanswer and the two differ, the score is 0, so "yes" never gets partial credit
against "no" through shared tokens elsewhere.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop articles, collapse whitespace (in SQuAD's order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    overlap = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def max_over_golds(metric, prediction: str | None, golds: Sequence[str]) -> float:
    """The best score against any gold answer; a missing prediction scores 0."""
    if prediction is None or not golds:
        return 0.0
    return max(metric(prediction, str(gold)) for gold in golds)


def em_score(prediction: str | None, golds: Sequence[str]) -> float:
    return max_over_golds(exact_match, prediction, golds)


def f1_score(prediction: str | None, golds: Sequence[str]) -> float:
    return max_over_golds(token_f1, prediction, golds)


@dataclass(frozen=True)
class Prediction:
    dataset: str
    prediction: str | None  # None when the agent gave no parseable answer
    golden_answers: tuple[str, ...]


@dataclass(frozen=True)
class DatasetScore:
    dataset: str
    count: int
    em: float  # mean over questions, in [0, 1]
    f1: float
    answered: float  # fraction with a parseable answer


def score_by_dataset(predictions: Iterable[Prediction]) -> list[DatasetScore]:
    """Per-dataset means, in first-seen dataset order, plus an "average" row (macro over
    datasets, as the papers' Avg columns are)."""
    groups: dict[str, list[Prediction]] = {}
    for p in predictions:
        groups.setdefault(p.dataset, []).append(p)
    rows = []
    for dataset, items in groups.items():
        n = len(items)
        rows.append(
            DatasetScore(
                dataset=dataset,
                count=n,
                em=sum(em_score(p.prediction, p.golden_answers) for p in items) / n,
                f1=sum(f1_score(p.prediction, p.golden_answers) for p in items) / n,
                answered=sum(p.prediction is not None for p in items) / n,
            )
        )
    if len(rows) > 1:
        k = len(rows)
        rows.append(
            DatasetScore(
                dataset="average",
                count=sum(r.count for r in rows),
                em=sum(r.em for r in rows) / k,
                f1=sum(r.f1 for r in rows) / k,
                answered=sum(r.answered for r in rows) / k,
            )
        )
    return rows
