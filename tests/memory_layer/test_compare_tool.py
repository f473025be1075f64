"""tools/memory_layer_compare.py with the scripted roles: held-out turns through Memory.add,
questions through Memory.answer, one row per manager."""

import json

from tests.tools_import import load_tool


def test_a_scripted_manager_row_counts_what_it_did(tmp_path, capsys):
    out = tmp_path / "rows.json"
    args = ["--managers", "scripted", "--conversations", "1", "--max_questions", "3"]
    assert load_tool("memory_layer_compare").main([*args, "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == row
    assert row["manager"] == "scripted" and row["questions"] == 3
    # The scripted manager writes well-formed operations, and what it adds is kept.
    assert row["manager_calls"] == row["manager_well_formed"] > 0 and row["rejected_ops"] == 0
    events = row["events"]
    assert events.get("ADD", 0) > 0 and row["memories"] == events["ADD"] - events.get("DELETE", 0)
    assert 0 <= row["gold_in_memories"] <= 100 and row["memory_words"] >= row["memories"]


def test_trained_weights_must_match_the_managers(capsys):
    tool = load_tool("memory_layer_compare")
    assert tool.main(["--managers", "scripted,scripted", "--trained", "/a"]) == 2
    assert capsys.readouterr().err.strip() == "--trained: 1 entries for 2 managers"
