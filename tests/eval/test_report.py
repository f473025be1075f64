"""Report builder: Table 1 shape, question-weighted overall, latency and memory fields."""

import json

import pytest

from memjax.eval.judge import JudgeVerdict
from memjax.eval.report import QuestionResult, build_report, latency_stats
from memjax.eval.scoring import mem0_scores, official_scores

# Memory-R1 Table 1, LLaMA-3.1-8B GRPO, F1/B1/J per category, and the 1,307 test counts.
GRPO = {
    1: (35.73, 27.70, 59.83),
    3: (35.65, 30.77, 53.01),
    4: (47.42, 41.24, 68.78),
    2: (49.86, 38.27, 51.55),
}
TEST_COUNTS = {1: 239, 2: 258, 3: 83, 4: 727}


def _results_with_means(means, counts):
    out = []
    for cat, n in counts.items():
        f1, b1, j = (v / 100 for v in means[cat])
        for _ in range(n):
            out.append(QuestionResult("conv-x", len(out), cat, {"f1": f1, "bleu1": b1, "j": j}))
    return out


def test_overall_is_question_weighted_and_reproduces_table1():
    results = _results_with_means(GRPO, TEST_COUNTS)
    results.append(QuestionResult("conv-x", 9999, 5, {}))  # adversarial: left out, counted
    report = build_report(results, method="Memory-R1-GRPO")
    assert [r.category for r in report.rows] == [1, 3, 4, 2, None]
    assert report.overall.count == 1307 and report.excluded == {5: 1}
    overall = [100 * report.overall.means[m] for m in ("f1", "bleu1", "j")]
    assert overall == pytest.approx([45.02, 37.51, 62.74], abs=0.01)  # the paper's Overall
    column_mean = sum(v[0] for v in GRPO.values()) / 4
    assert abs(overall[0] - column_mean) > 1  # not the mean of the columns


def test_markdown_and_json():
    results = [
        QuestionResult("conv-a", 0, 1, {"f1": 1.0, "bleu1": 0.5, "j": 1.0}),
        QuestionResult("conv-a", 1, 2, {"f1": 0.0, "bleu1": 0.0, "j": 0.0}),
        QuestionResult("conv-b", 0, 2, {"f1": 0.5, "bleu1": 0.25, "j": 1.0}),
    ]
    report = build_report(
        results,
        method="memjax",
        categories=(1, 2),
        latencies={"answer": [1, 2, 3, 4, 5]},
        memory_tokens={"conv-a": 100, "conv-b": 300},
        counters={"manager_parse": {"unknown_id": 2}},
    )
    md = report.to_markdown()
    assert (
        md.splitlines()[0] == "| Method | Single Hop F1/B1/J | Temporal F1/B1/J | Overall F1/B1/J |"
    )
    assert (
        md.splitlines()[2]
        == "| memjax | 100.00/50.00/100.00 | 25.00/12.50/50.00 | 50.00/25.00/66.67 |"
    )
    assert "1 single-hop, 2 temporal, 3 multi-hop, 4 open-domain" in md
    assert "answer p50 3.000, p95 4.800 (n=5)" in md
    assert "mean 200.0" in md and "unknown_id 2" in md
    data = json.loads(report.to_json_str())
    assert data["rows"][-1]["means"]["j"] == pytest.approx(2 / 3)
    assert data["latency"]["answer"]["p95_s"] == pytest.approx(4.8)
    assert data["mean_memory_tokens"] == 200.0
    assert "Mem0/Memory-R1 mapping" in data["category_note"]


def test_official_protocol_table_includes_adversarial():
    results = [
        QuestionResult("c", 0, 5, official_scores("Not mentioned.", None, 5)),
        QuestionResult("c", 1, 4, official_scores("Paris", "Paris", 4)),
        QuestionResult("c", 2, 4, official_scores("Rome", "Paris", 4)),
    ]
    report = build_report(results, method="m", metrics=("official_f1",), categories=(4, 1, 2, 3, 5))
    assert report.overall.means["official_f1"] == pytest.approx(2 / 3)  # micro over all items
    assert report.rows[1].count == 0 and report.excluded == {}


def test_scoring_helpers_and_errors():
    s = mem0_scores("the beach", "beach", JudgeVerdict("CORRECT", "json"))
    assert s["em"] == 1.0 and s["j"] == 1.0 and s["f1"] == pytest.approx(2 / 3)
    assert mem0_scores(None, "beach") == {"f1": 0.0, "bleu1": 0.0, "em": 0.0}
    with pytest.raises(ValueError, match="lacks metrics"):
        build_report([QuestionResult("c", 0, 1, {"f1": 1.0})], method="m")
    with pytest.raises(ValueError, match="no measurements"):
        latency_stats([])
    assert latency_stats([0.1, 0.3]).p50_s == pytest.approx(0.2)
