"""A paired comparison of two evaluations of the same questions, and the tool around it."""

import json
import math
from pathlib import Path

import pytest

from memjax.eval.paired import paired_difference
from tests.tools_import import load_tool


def test_the_paired_standard_error_is_the_differences_own():
    before = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 1.0, "only-before": 1.0}
    after = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0, "only-after": 0.0}
    diff = paired_difference(before, after)
    # differences over a, b, c, d: +1, 0, +1, -1 -> mean 0.25, sample sd sqrt(11/12)
    assert diff.n == 4 and diff.mean == pytest.approx(0.25)
    assert diff.se == pytest.approx(math.sqrt(11 / 12) / 2)
    assert (diff.gained, diff.lost, diff.only_before, diff.only_after) == (2, 1, 1, 1)
    assert diff.z == pytest.approx(0.25 / diff.se)


def test_a_shared_difficulty_cancels_in_the_paired_error():
    # Runs that agree on which questions are hard: every question rises by 0.1.
    before = {str(i): (i % 2) * 0.8 for i in range(10)}
    after = {k: v + 0.1 for k, v in before.items()}
    diff = paired_difference(before, after)
    assert diff.mean == pytest.approx(0.1) and diff.se == pytest.approx(0.0, abs=1e-12)
    assert diff.z > 1e6


def _write(path: Path, rows):
    path.mkdir()
    with open(path / "predictions.jsonl", "w") as f:
        for uid, em in rows:
            f.write(json.dumps({"uid": uid, "scores": {"em": em, "f1": em}}) + "\n")


def test_the_tool_compares_two_eval_workdirs(tmp_path, capsys):
    tool = load_tool("compare_predictions")
    _write(tmp_path / "sft", [("q1", 0.0), ("q2", 1.0), ("q3", 0.0)])
    _write(tmp_path / "rl", [("q1", 1.0), ("q2", 1.0), ("q3", 1.0)])
    assert tool.main([str(tmp_path / "sft"), str(tmp_path / "rl")]) == 0
    out = capsys.readouterr().out.splitlines()
    result = json.loads(out[-1])
    assert result["n"] == 3 and result["gained"] == 2 and result["mean"] == pytest.approx(2 / 3)
    assert "paired difference: +66.7" in out[2]
    assert tool.main([str(tmp_path / "sft"), str(tmp_path / "missing")]) == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "predictions.jsonl").write_text('{"answer": "x"}\n')
    assert tool.main([str(tmp_path / "sft"), str(tmp_path / "bad")]) == 2
    assert (
        "predictions.jsonl:1: a prediction needs 'uid' and 'scores' (memory_r1.eval)"
        in capsys.readouterr().err
    )


def _episode(agent, question, answer, valid=True):
    return {
        "agent": agent,
        "dataset": "hotpotqa",
        "question": question,
        "golden_answers": ["Paris"],
        "answer": answer,
        "format_valid": valid,
    }


def _write_search_eval(path: Path, episodes):
    (path / "eval").mkdir(parents=True)
    with open(path / "eval" / "predictions.jsonl", "w") as f:
        for e in episodes:
            f.write(json.dumps(e) + "\n")


def test_the_tool_compares_one_search_agent_question_by_question(tmp_path, capsys):
    tool = load_tool("compare_predictions")
    # SFT: q1 wrong and unboxed, q2 right; ReAct's episodes beside them must not count.
    _write_search_eval(
        tmp_path / "sft",
        [
            _episode("memsearcher", "q1?", None, valid=False),
            _episode("memsearcher", "q2?", "Paris"),
            _episode("react", "q1?", "Paris"),
        ],
    )
    _write_search_eval(
        tmp_path / "grpo",
        [_episode("memsearcher", "q1?", "paris"), _episode("memsearcher", "q2?", "Lyon")],
    )
    sft, grpo = str(tmp_path / "sft"), str(tmp_path / "grpo")
    assert tool.main([sft, grpo]) == 0
    em = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (em["n"], em["gained"], em["lost"], em["mean"]) == (2, 1, 1, 0.0)
    assert tool.main([sft, grpo, "--metric", "format_valid"]) == 0
    valid = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (valid["gained"], valid["lost"], valid["mean"]) == (1, 0, 0.5)
    assert tool.main([sft, grpo, "--agent", "react"]) == 2  # GRPO's run has no ReAct episode
    assert "share no scored question" in capsys.readouterr().err
