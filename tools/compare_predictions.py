"""Two evaluations of the same held-out questions, question by question: is the second one
better by more than its noise?

    python tools/compare_predictions.py /tmp/eval_sft /tmp/eval_grpo [--metric em]

Each argument is a `memory_r1.eval` or `memsearcher.eval` workdir (or its predictions.jsonl);
a `memsearcher.eval` one is compared on one agent's episodes (`--agent`, MemSearcher by
default), question by question, on em, f1 or format_valid. Prints each run's mean
with its standard error and n, then the paired difference (second minus first) with the
standard error of the per-question differences, how many standard errors that is, and how
many questions rose and fell. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _predictions_file(path: Path) -> Path:
    """A predictions.jsonl, a `memory_r1.eval` workdir, or a `memsearcher.eval` one (eval/)."""
    if not path.is_dir():
        return path
    own = path / "predictions.jsonl"
    nested = path / "eval" / "predictions.jsonl"
    return nested if not own.exists() and nested.exists() else own


def _scores(path: Path, metric: str, agent: str) -> dict[str, float]:
    from memjax.agents.search_agent_report import question_scores

    file = _predictions_file(path)
    rows = []
    with open(file) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            search_agent = {"agent", "question", "answer", "golden_answers"} <= row.keys()
            if not search_agent and ("uid" not in row or "scores" not in row):
                raise ValueError(
                    f"{file}:{number}: a prediction needs 'uid' and 'scores' (memory_r1.eval) "
                    "or 'agent', 'question', 'answer' and 'golden_answers' (memsearcher.eval)"
                )
            rows.append(row)
    if rows and "uid" not in rows[0]:  # a search agent's episodes, one agent's at a time
        by_question = question_scores(rows, agent)
        return {q: s[metric] for q, s in by_question.items() if metric in s}
    return {r["uid"]: float(r["scores"][metric]) for r in rows if metric in r["scores"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before", type=Path, help="the first evaluation (e.g. SFT)")
    p.add_argument("after", type=Path, help="the second evaluation of the same questions")
    p.add_argument(
        "--metric",
        default="em",
        help="a key of each prediction's scores (memsearcher.eval: em, f1, format_valid)",
    )
    p.add_argument(
        "--agent", default="memsearcher", help="memsearcher.eval: whose episodes to compare"
    )
    args = p.parse_args(argv)

    from memjax.eval.paired import mean_se, paired_difference

    try:
        before, after = (
            _scores(path, args.metric, args.agent) for path in (args.before, args.after)
        )
    except (OSError, ValueError) as e:
        print(e, file=sys.stderr)
        return 2
    diff = paired_difference(before, after)
    if diff.n == 0:
        print(f"{args.before} and {args.after} share no scored question", file=sys.stderr)
        return 2
    for name, scores in ((args.before, before), (args.after, after)):
        mean, se, n = mean_se(list(scores.values()))
        print(f"{name}: {args.metric} {100 * mean:.1f} +- {100 * se:.1f} (n={n})")
    print(
        f"paired difference: {100 * diff.mean:+.1f} +- {100 * diff.se:.1f} ({diff.z:+.2f} se) "
        f"over n={diff.n}; {diff.gained} rose, {diff.lost} fell"
    )
    if diff.only_before or diff.only_after:
        print(
            f"not compared: {diff.only_before} only in the first, {diff.only_after} only in the second"
        )
    print(
        json.dumps(
            {
                "metric": args.metric,
                **{
                    k: getattr(diff, k)
                    for k in ("mean", "se", "n", "gained", "lost", "only_before", "only_after")
                },
                "z": diff.z,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
