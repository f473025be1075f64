"""Tokens-per-turn statistics and the EM/F1 and tokens tables."""

import json

import pytest

from memjax.eval import qa_report, token_report
from memjax.eval.qa_metrics import Prediction, score_by_dataset


def test_turn_stats_over_ragged_episodes():
    rows = token_report.turn_stats([[100, 120, 140], [90, 150], [80]])
    assert [(r.turn, r.episodes, r.peak) for r in rows] == [(1, 3, 100), (2, 2, 150), (3, 1, 140)]
    assert rows[0].mean == pytest.approx(90.0) and rows[1].mean == pytest.approx(135.0)
    assert token_report.turn_stats([]) == []


def test_tables_and_plot(tmp_path):
    table = {
        "memsearcher": token_report.turn_stats([[500, 520], [510]]),
        "react": token_report.turn_stats([[500, 900, 1300]]),
    }
    md = token_report.to_markdown(table)
    lines = md.strip().splitlines()
    assert lines[0] == (
        "| turn | memsearcher mean | memsearcher peak | memsearcher n "
        "| react mean | react peak | react n |"
    )
    assert lines[2] == "| 1 | 505.0 | 510 | 2 | 500.0 | 500 | 1 |"
    assert lines[4] == "| 3 |  |  | 0 | 1300.0 | 1300 | 1 |"
    data = json.loads(token_report.to_json(table))
    assert data["react"][2] == {"turn": 3, "episodes": 1, "mean": 1300.0, "peak": 1300}
    paths = token_report.write_reports(table, tmp_path / "report")
    assert paths["plot"].stat().st_size > 1000
    assert json.loads(paths["json"].read_text()) == data


def test_qa_tables():
    scores = score_by_dataset(
        [Prediction("hotpotqa", "Paris", ("Paris",)), Prediction("hotpotqa", None, ("x",))]
    )
    md = qa_report.to_markdown({"rag": scores})
    assert "| rag | hotpotqa | 2 | 50.0 | 50.0 | 50.0 |" in md
    assert json.loads(qa_report.to_json({"rag": scores}))["rag"][0]["count"] == 2
