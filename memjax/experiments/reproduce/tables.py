"""The reproduction's tables, read from its stages' own reports, in the papers' shapes.

    rows = memory_r1_rows([("Memory-SFT", root / "mr1_eval_sft"), ...])
    rows = memsearcher_rows([("SFT", root / "ms_eval_sft"), ...])

Every score carries its standard error over questions (the sample standard deviation of the
per-question scores over sqrt(n), from the stage's predictions.jsonl) and its n, and every
table names the split and its sizes that the stage's report names.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from memjax.agents.search_agent_report import question_scores
from memjax.data.categories import ADVERSARIAL
from memjax.eval.paired import mean_se, paired_difference
from memjax.eval.qa_metrics import em_score, f1_score

CATEGORIES = ("single-hop", "multi-hop", "open-domain", "temporal", "overall")
MEM0_METRICS = ("f1", "bleu1", "j", "em")
OPS = ("add", "update", "delete", "none")


def read_jsonl(path: Path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# --- Memory-R1 (Table 1/3 shape) --------------------------------------------------------


def memory_r1_row(label: str, stage_dir: Path) -> dict:
    """One row: per-category Mem0-protocol means, the official F1, overall means with their
    standard errors, operation counts and memory tokens."""
    mem0 = json.loads((stage_dir / "report_mem0.json").read_text())
    official = json.loads((stage_dir / "report_official.json").read_text())
    predictions = read_jsonl(stage_dir / "predictions.jsonl")
    mem0_scored = _mem0_scored(predictions)
    overall = {
        m: mean_se([p["scores"][m] for p in mem0_scored if m in p["scores"]]) for m in MEM0_METRICS
    }
    overall["official_f1"] = mean_se([p["scores"]["official_f1"] for p in predictions])
    construction = mem0["counters"].get("construction", {})
    # A judge that calls an answer the agent never wrote correct is not judging: counted so
    # the table can say how far its J is to be trusted.
    judged_empty = [
        p["scores"]["j"] for p in predictions if p["answer"] is None and "j" in p["scores"]
    ]
    return {
        "label": label,
        "stage": stage_dir.name,
        "split": mem0["split"],
        "categories": {r["name"]: {"count": r["count"], **r["means"]} for r in mem0["rows"]},
        "official": {r["name"]: r["means"]["official_f1"] for r in official["rows"]},
        "overall": {m: {"mean": v[0], "se": v[1], "n": v[2]} for m, v in overall.items()},
        "operations": {op: construction.get(f"manager_op_{op}", 0) for op in OPS},
        "rejected": sum(v for k, v in construction.items() if k.startswith("manager_rejected_")),
        # of those, entries with no event or one outside ADD/UPDATE/DELETE/NONE: Mem0's own loop
        # skips them without a word, so they change the bank no differently from a NONE
        "rejected_no_event": construction.get("manager_rejected_unknown_event", 0),
        "manager_turns_well_formed": [
            construction.get("manager_turns_well_formed", 0),
            construction.get("manager_turns", 0),
        ],
        "mean_memory_tokens": mem0.get("mean_memory_tokens", 0.0),
        "judge_on_no_answer": [int(sum(judged_empty)), len(judged_empty)],
    }


def _mem0_scored(predictions: list[dict]) -> list[dict]:
    """The questions the Mem0 protocol scores: not the adversarial ones (category 5, no gold
    answer), which only the official protocol's F1 scores (by abstention). The evaluation writes
    no Mem0 scores for them; files written before it did carried zeros, hence the filter."""
    return [p for p in predictions if p.get("category") != ADVERSARIAL]


def memory_r1_markdown(rows: list[dict], judge: str) -> str:
    head = "| method | " + " | ".join(f"{c} F1 / B1 / J" for c in CATEGORIES[:-1])
    head += " | overall F1 ± se | overall B1 | overall J | EM ± se | official F1 ± se | n |"
    # n: the Mem0 protocol's questions, and the official protocol's when it scores more.
    lines = [head, "|---" * (len(CATEGORIES) + 6) + "|"]
    for row in rows:
        cells = [row["label"]]
        for c in CATEGORIES[:-1]:
            m = row["categories"].get(c)
            cells.append(_triple(m) if m else "-")
        o = row["overall"]
        cells += [_pm(o["f1"]), _pct(o["bleu1"]["mean"]), _pct(o["j"]["mean"]), _pm(o["em"])]
        cells += [_pm(o["official_f1"]), _counts(o["f1"]["n"], o["official_f1"]["n"])]
        lines.append("| " + " | ".join(cells) + " |")
    head = "| method | ADD | UPDATE | DELETE | NONE | rejected (of which no event) | well-formed turns |"
    lines += ["", head]
    lines += ["|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ops = row["operations"]
        well, turns = row["manager_turns_well_formed"]
        counts = " | ".join(str(ops[o]) for o in OPS)
        rejected = f"{row['rejected']} ({row['rejected_no_event']})"
        lines.append(f"| {row['label']} | {counts} | {rejected} | {well}/{turns} |")
    lines += ["", "| method | memory tokens per conversation |", "|---|---:|"]
    lines += [f"| {r['label']} | {r['mean_memory_tokens']:.0f} |" for r in rows]
    lines += ["", "| method | judged correct with no answer written |", "|---|---:|"]
    lines += [f"| {r['label']} | {'/'.join(map(str, r['judge_on_no_answer']))} |" for r in rows]
    split = rows[0]["split"] if rows else {}
    lines += ["", f"Scores in %. J: judged by {judge}. Split: {_split(split)}."]
    return "\n".join(lines) + "\n"


# --- MemSearcher -------------------------------------------------------------------------


def memsearcher_rows(label: str, stage_dir: Path) -> list[dict]:
    """One row per agent the stage evaluated: EM and F1 with standard errors, format validity,
    searches, and its context tokens per turn."""
    eval_dir = stage_dir / "eval"
    split = json.loads((eval_dir / "qa_scores.json").read_text())["split"]
    behaviour = {b["agent"]: b for b in json.loads((eval_dir / "behaviour.json").read_text())}
    turns = json.loads((eval_dir / "tokens_per_turn.json").read_text())["turns"]
    by_agent: dict[str, list[dict]] = defaultdict(list)
    for p in read_jsonl(eval_dir / "predictions.jsonl"):
        by_agent[p["agent"]].append(p)
    rows = []
    for agent, predictions in by_agent.items():
        em = mean_se([em_score(p["answer"], p["golden_answers"]) for p in predictions])
        f1 = mean_se([f1_score(p["answer"], p["golden_answers"]) for p in predictions])
        rows.append(
            {
                "label": label,
                "agent": agent,
                "stage": stage_dir.name,
                "split": split,
                "em": {"mean": em[0], "se": em[1], "n": em[2]},
                "f1": {"mean": f1[0], "se": f1[1], "n": f1[2]},
                "behaviour": behaviour.get(agent, {}),
                "turns": turns.get(agent, []),
            }
        )
    return rows


def memsearcher_markdown(rows: list[dict]) -> str:
    lines = [
        "| method | agent | EM ± se | F1 ± se | format valid | searched | searches | n | stops |"
    ]
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        b = r["behaviour"]
        cells = [r["label"], r["agent"], _pm(r["em"]), _pm(r["f1"])]
        cells += [_pct(b.get("format_valid", 0.0)), _pct(b.get("searched", 0.0))]
        cells += [f"{b.get('searches_per_episode', 0.0):.2f}", str(r["em"]["n"])]
        cells.append(", ".join(f"{k} {v}" for k, v in b.get("stop_reasons", {}).items()))
        lines.append("| " + " | ".join(cells) + " |")
    most = max((len(r["turns"]) for r in rows), default=0)
    lines += ["", "Context tokens per turn, mean / peak (episodes still running):", ""]
    lines.append("| method | agent | " + " | ".join(f"turn {t + 1}" for t in range(most)) + " |")
    lines.append("|---|---" + "|---:" * most + "|")
    for r in rows:
        cells = [f"{t['mean']:.0f} / {t['peak']} ({t['episodes']})" for t in r["turns"]]
        cells += ["-"] * (most - len(cells))
        lines.append(f"| {r['label']} | {r['agent']} | " + " | ".join(cells) + " |")
    split = rows[0]["split"] if rows else {}
    lines += ["", f"EM and F1 in %. Split: {_split(split)}."]
    return "\n".join(lines) + "\n"


# --- against the SFT row, question by question -----------------------------------------


def memory_r1_scores(stage_dir: Path) -> dict[str, dict[str, float]]:
    """question uid -> its Mem0-protocol scores (category 5 is not Mem0-scored: left out)."""
    predictions = _mem0_scored(read_jsonl(stage_dir / "predictions.jsonl"))
    return {p["uid"]: p["scores"] for p in predictions if p["scores"]}


def memsearcher_scores(stage_dir: Path, agent: str = "memsearcher") -> dict[str, dict]:
    """question -> EM, F1 and format validity of one agent's episodes (asked once per agent)."""
    return question_scores(read_jsonl(stage_dir / "eval" / "predictions.jsonl"), agent)


def paired_rows(reference: tuple[str, dict], others: list[tuple[str, dict]]) -> list[dict]:
    """Each other row minus the reference on the questions both scored, EM and F1: the
    difference, the standard error of the per-question differences, and its z."""
    label, ref = reference
    rows = []
    for other_label, scores in others:
        row = {"label": other_label, "reference": label}
        for metric in ("em", "f1"):
            d = paired_difference(
                {u: s[metric] for u, s in ref.items()},
                {u: s[metric] for u, s in scores.items()},
            )
            row[metric] = {"mean": d.mean, "se": d.se, "z": d.z, "n": d.n}
            row[metric] |= {"rose": d.gained, "fell": d.lost}
        rows.append(row)
    return rows


def paired_markdown(rows: list[dict]) -> str:
    """One reference for all rows: named above the table; several: a column of their own."""
    if not rows:
        return ""
    one = len({r["reference"] for r in rows}) == 1
    against = f"Against {rows[0]['reference']}" if one else "Each row against the one beside it"
    lines = [
        f"{against}, on the questions both scored (difference ± the standard error of the "
        "per-question differences; z = difference / se):",
        "",
        "| method |"
        + ("" if one else " against |")
        + " EM diff ± se (z) | F1 diff ± se (z) | questions rose / fell (EM) | n |",
        "|---|" + ("" if one else "---|") + "---:|---:|---:|---:|",
    ]
    for r in rows:
        em, f1 = r["em"], r["f1"]
        cells = [r["label"]] + ([] if one else [r["reference"]])
        cells += [_diff(em), _diff(f1), f"{em['rose']} / {em['fell']}", str(em["n"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _diff(d: dict) -> str:
    return f"{100 * d['mean']:+.1f} ± {100 * d['se']:.1f} ({d['z']:+.1f})"


# --- training curves ---------------------------------------------------------------------


def curve_row(name: str, stage_dir: Path, curves_file: str) -> dict | None:
    """A training stage's curve (the train value per step) and its evaluations (step 0: the
    starting weights, when the stage took that point); None when the stage wrote none."""
    path = stage_dir / curves_file
    if not path.is_file():
        return None
    numbers = json.loads(path.read_text())
    key, eval_key = numbers["curve"], numbers["eval_key"]
    train = [h[key] for h in numbers["history"] if key in h]
    evals = [(e["step"], e[eval_key]) for e in numbers["evals"] if eval_key in e]
    return {"stage": name, "curve": key, "train": train, "eval_key": eval_key, "evals": evals}


def curves_markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    lines = [
        "| stage | steps | mean train value by step | evaluations (step: value) |",
        "|---|---:|---|---|",
    ]
    for r in rows:
        evals = ", ".join(f"{step}: {value:.3f}" for step, value in r["evals"]) or "none"
        cells = [r["stage"], str(len(r["train"])), f"{r['curve']}: {_series(r['train'])}"]
        lines.append("| " + " | ".join(cells + [f"{r['eval_key']}: {evals}"]) + " |")
    return "\n".join(lines) + "\n"


def _series(values: list[float], shown: int = 12) -> str:
    """Every value of a short curve; a long one's first and last few."""
    text = [f"{v:.3f}" for v in values]
    if len(text) > shown:
        text = text[: shown // 2] + ["..."] + text[-shown // 2 :]
    return ", ".join(text)


# --- formatting --------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _counts(mem0_n: int, official_n: int) -> str:
    return str(mem0_n) if mem0_n == official_n else f"{mem0_n} (official {official_n})"


def _pm(stat: dict) -> str:
    return f"{100 * stat['mean']:.1f} ± {100 * stat['se']:.1f}"


def _triple(m: dict) -> str:
    return " / ".join(_pct(m.get(k, 0.0)) for k in ("f1", "bleu1", "j"))


def _split(split: dict) -> str:
    sizes = ", ".join(f"{k} {v}" for k, v in split.get("sizes", {}).items())
    return f"{split.get('name', '?')} ({sizes}; {split.get('how', '')})"


__all__ = [
    "curve_row",
    "curves_markdown",
    "mean_se",
    "memory_r1_row",
    "memory_r1_markdown",
    "memsearcher_rows",
    "memsearcher_markdown",
    "memory_r1_scores",
    "memsearcher_scores",
    "paired_rows",
    "paired_markdown",
]
