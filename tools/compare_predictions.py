"""Two evaluations of the same held-out questions, question by question: is the second one
better by more than its noise?

    python tools/compare_predictions.py /tmp/eval_sft /tmp/eval_grpo [--metric em]

Each argument is a `memory_r1.eval` workdir (or its predictions.jsonl). Prints each run's mean
with its standard error and n, then the paired difference (second minus first) with the
standard error of the per-question differences, how many standard errors that is, and how
many questions rose and fell. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _scores(path: Path, metric: str) -> dict[str, float]:
    file = path / "predictions.jsonl" if path.is_dir() else path
    out = {}
    with open(file) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "uid" not in row or "scores" not in row:
                raise ValueError(f"{file}:{number}: a prediction needs 'uid' and 'scores'")
            if metric in row["scores"]:
                out[row["uid"]] = float(row["scores"][metric])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("before", type=Path, help="the first evaluation (e.g. SFT)")
    p.add_argument("after", type=Path, help="the second evaluation of the same questions")
    p.add_argument("--metric", default="em", help="a key of each prediction's scores")
    args = p.parse_args(argv)

    from memjax.eval.paired import paired_difference
    from memjax.reproduce.tables import mean_se

    try:
        before, after = (_scores(path, args.metric) for path in (args.before, args.after))
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
