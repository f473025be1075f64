"""The reproduction's tables from stage reports written here: per-question standard errors,
both protocols, operation counts, a judge that calls unwritten answers correct, and the
MemSearcher rows with EM/F1 recomputed from the predictions and tokens per turn."""

import json
import math

import pytest

from memjax.experiments.reproduce import tables as T

SPLIT = {"name": "test", "sizes": {"test": 4, "scored": 4}, "how": "synthetic held-out seed 1"}


def _mr1_stage(d):
    d.mkdir()
    rows = [
        {"name": "single-hop", "category": 1, "count": 3, "means": {"f1": 0.5, "bleu1": 0.5, "j": 1, "em": 0.5}},
        {"name": "overall", "category": None, "count": 4, "means": {"f1": 0.5, "bleu1": 0.5, "j": 1, "em": 0.5}},
    ]  # fmt: skip
    counters = {"construction": {"manager_op_add": 5, "manager_op_update": 2, "manager_op_none": 1,
                "manager_rejected_unknown_id": 2, "manager_rejected_unknown_event": 1,
                "manager_turns": 9, "manager_turns_well_formed": 7}}  # fmt: skip
    mem0 = {"split": SPLIT, "rows": rows, "counters": counters, "mean_memory_tokens": 120.0}
    official = {"split": SPLIT, "rows": [{"name": "overall", "means": {"official_f1": 0.4}}]}
    (d / "report_mem0.json").write_text(json.dumps(mem0))
    (d / "report_official.json").write_text(json.dumps(official))
    scores = [(1.0, "a"), (0.0, "b"), (1.0, "c"), (0.0, None)]
    with open(d / "predictions.jsonl", "w") as f:
        for em, answer in scores:
            s = {"f1": em, "bleu1": em, "em": em, "j": 1.0, "official_f1": em}
            f.write(json.dumps({"category": 1, "answer": answer, "scores": s}) + "\n")
        # category 5: scored by the official protocol only; the evaluation writes the other
        # metrics' zeros beside it (no gold answer), which the Mem0 columns must not count.
        s = {"f1": 0.0, "bleu1": 0.0, "em": 0.0, "official_f1": 1.0}
        f.write(json.dumps({"category": 5, "answer": None, "scores": s}) + "\n")
    return d


def test_memory_r1_row_standard_errors_counts_and_judge_check(tmp_path):
    row = T.memory_r1_row("Memory-SFT", _mr1_stage(tmp_path / "mr1_eval_sft"))
    em = row["overall"]["em"]
    assert em["n"] == 4 and em["mean"] == 0.5
    assert em["se"] == pytest.approx(math.sqrt((4 * 0.25) / 3 / 4))  # sample sd / sqrt(n)
    assert row["overall"]["f1"]["n"] == 4 and row["overall"]["f1"]["mean"] == 0.5
    official = row["overall"]["official_f1"]  # category 5 counts in the official protocol
    assert official["n"] == 5 and official["mean"] == pytest.approx(3 / 5)
    assert row["operations"] == {"add": 5, "update": 2, "delete": 0, "none": 1}
    assert row["rejected"] == 3 and row["rejected_no_event"] == 1
    assert row["manager_turns_well_formed"] == [7, 9]
    assert row["judge_on_no_answer"] == [1, 1]
    md = T.memory_r1_markdown([row], "a test judge")
    assert "| Memory-SFT | 50.0 / 50.0 / 100.0 |" in md
    assert "judged by a test judge" in md and "synthetic held-out seed 1" in md
    assert "| Memory-SFT | 5 | 2 | 0 | 1 | 3 (1) | 7/9 |" in md
    assert "| 60.0 ± 24.5 | 4 (official 5) |" in md


def test_memsearcher_rows_recompute_em_f1_per_agent(tmp_path):
    eval_dir = tmp_path / "ms_eval_sft" / "eval"
    eval_dir.mkdir(parents=True)
    split = {"name": "eval", "sizes": {"train": 8, "eval": 2}, "how": "cut by id"}
    (eval_dir / "qa_scores.json").write_text(json.dumps({"split": split, "scores": {}}))
    behaviour = [{"agent": "memsearcher", "format_valid": 0.5, "searched": 1.0,
                  "searches_per_episode": 2.0}]  # fmt: skip
    (eval_dir / "behaviour.json").write_text(json.dumps(behaviour))
    turns = {"memsearcher": [{"turn": 1, "episodes": 2, "mean": 400.0, "peak": 410}]}
    (eval_dir / "tokens_per_turn.json").write_text(json.dumps({"split": split, "turns": turns}))
    rows = [
        {"agent": "memsearcher", "answer": "Paris", "golden_answers": ["paris", "Paris, France"]},
        {"agent": "memsearcher", "answer": None, "golden_answers": ["Lyon"]},
        {"agent": "react", "answer": "the Lyon city", "golden_answers": ["Lyon"]},
    ]
    (eval_dir / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_agent = {r["agent"]: r for r in T.memsearcher_rows("SFT", tmp_path / "ms_eval_sft")}
    assert by_agent["memsearcher"]["em"] == {"mean": 0.5, "se": 0.5, "n": 2}
    # "the" is dropped by normalisation: "lyon city" against "lyon", F1 = 2 x 0.5 x 1 / 1.5
    assert by_agent["react"]["em"]["mean"] == 0.0
    assert by_agent["react"]["f1"]["mean"] == pytest.approx(2 / 3)
    md = T.memsearcher_markdown(list(by_agent.values()))
    assert "| SFT | memsearcher | 50.0 ± 50.0 |" in md and "400 / 410 (2)" in md
    assert "eval (train 8, eval 2; cut by id)" in md


def _mr1_predictions(d, ems):
    d.mkdir()
    with open(d / "predictions.jsonl", "w") as f:
        for i, em in enumerate(ems):
            row = {"uid": f"c/{i}", "category": 1, "scores": {"em": em, "f1": em}}
            f.write(json.dumps(row) + "\n")
        # category 5: not compared (its zero EM and F1 are not the Mem0 protocol's)
        adversarial = {"uid": "c/adv", "category": 5, "scores": {"em": 0.0, "f1": 0.0}}
        f.write(json.dumps(adversarial) + "\n")
    return d


def test_trained_rows_are_held_against_sft_question_by_question(tmp_path):
    sft = T.memory_r1_scores(_mr1_predictions(tmp_path / "sft", [0, 1, 0, 1, 0]))
    rl = T.memory_r1_scores(_mr1_predictions(tmp_path / "rl", [1, 1, 1, 1, 0]))
    worse = T.memory_r1_scores(_mr1_predictions(tmp_path / "worse", [0, 0, 0, 1, 0]))
    rows = T.paired_rows(("Memory-SFT", sft), [("GRPO", rl), ("GRPO 2", worse)])
    em = rows[0]["em"]
    # differences 1, 0, 1, 0, 0: mean 0.4, sample sd sqrt(0.3)
    assert em["n"] == 5 and em["mean"] == pytest.approx(0.4)
    assert em["se"] == pytest.approx(math.sqrt(0.3 / 5)) and (em["rose"], em["fell"]) == (2, 0)
    assert rows[1]["em"]["mean"] == pytest.approx(-0.2) and rows[1]["em"]["fell"] == 1
    md = T.paired_markdown(rows)
    assert "Against Memory-SFT" in md
    assert "| GRPO | +40.0 ± 24.5 (+1.6) | +40.0 ± 24.5 (+1.6) | 2 / 0 | 5 |" in md
    assert T.paired_markdown([]) == ""
    # rows held against different references name theirs in a column
    mixed = rows[:1] + T.paired_rows(("GRPO", rl), [("GRPO 2", worse)])
    md = T.paired_markdown(mixed)
    assert "Against" not in md and "| method | against |" in md
    assert "| GRPO 2 | GRPO | -60.0 ± 24.5 (-2.4) |" in md


def test_a_training_stages_curve_and_its_before_and_after_evaluations(tmp_path):
    numbers = {
        "curve": "reward",
        "eval_key": "reward",
        "history": [{"step": s, "reward": r, "kl": 0.0} for s, r in enumerate((0.0, 0.25, 0.5), 1)],
        "evals": [{"step": 0, "reward": 0.25}, {"step": 3, "reward": 0.375}],
    }
    (tmp_path / "curves.json").write_text(json.dumps(numbers))
    row = T.curve_row("mr1_grpo_s0_manager", tmp_path, "curves.json")
    assert row["train"] == [0.0, 0.25, 0.5] and row["evals"] == [(0, 0.25), (3, 0.375)]
    line = T.curves_markdown([row]).splitlines()[-1]
    assert line == (
        "| mr1_grpo_s0_manager | 3 | reward: 0.000, 0.250, 0.500 | reward: 0: 0.250, 3: 0.375 |"
    )
    assert T.curve_row("no curve yet", tmp_path / "missing", "curves.json") is None


def test_a_long_curve_shows_its_first_and_last_steps():
    row = {"stage": "sft", "curve": "loss", "train": [float(i) for i in range(80)]}
    row |= {"eval_key": "nll", "evals": []}
    cells = T.curves_markdown([row]).splitlines()[-1].split(" | ")
    assert (
        cells[2]
        == "loss: 0.000, 1.000, 2.000, 3.000, 4.000, 5.000, ..., 74.000, 75.000, 76.000, 77.000, 78.000, 79.000"
    )
    assert cells[3] == "nll: none |"
