"""Per-question scores under both LoCoMo protocols, as one dict per question for the report.

Keys: "f1", "bleu1", "em" (Mem0/Memory-R1 protocol), "j" (when a judge verdict is given) and
"official_f1" (the official LoCoMo code's per-category rule). Values in [0, 1].
"""

from __future__ import annotations

from memjax.eval.judge import JudgeVerdict
from memjax.eval.locomo_official import official_score
from memjax.eval.mem0_metrics import bleu1, exact_match, token_f1


def mem0_scores(
    prediction: str | None, gold: str, verdict: JudgeVerdict | None = None
) -> dict[str, float]:
    """F1 / BLEU-1 / EM (and J); a missing prediction (no parseable answer) scores 0."""
    pred = prediction or ""
    scores = {
        "f1": token_f1(pred, gold),
        "bleu1": bleu1(pred, gold),
        "em": exact_match(pred, gold) if prediction is not None else 0.0,
    }
    if verdict is not None:
        scores["j"] = verdict.score
    return scores


def official_scores(prediction: str | None, gold: str | None, category: int) -> dict[str, float]:
    return {"official_f1": official_score(prediction or "", gold, category)}
