"""Where a model's loss sits on held-out trajectories: each trained token's NLL, marked in place.

    python tools/token_nll.py <trajectories.jsonl> --source=<sft workdir | packaged:smollm2> \
        [--role manager] [--rows 24] [--threshold 0.3] [--quiet]

Each context of `--role` (at most `--rows`) is rendered as `sft.train` renders it and scored in
one forward pass. Printed per row: its trained tokens' total NLL, and the trained text with every
token above `--threshold` nats marked `[token|nll]`. The summary says how much of the total NLL
the single worst token of each row carries: when that share is near 1, the row's other trained
tokens (copies of the prompt, JSON syntax) are learned and the model is wrong on one decision
(e.g. the manager's ADD against UPDATE), and weighting tokens cannot help an Adam-trained model
(it rescales the one gradient that is left); more updates on those decisions can. The last line
is one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

import numpy as np


def _marked(pieces: list[str], nll: np.ndarray, threshold: float) -> str:
    return "".join(f"[{p}|{n:.1f}]" if n > threshold else p for p, n in zip(pieces, nll))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trajectories")
    p.add_argument("--source", required=True)
    p.add_argument("--role", default="manager")
    p.add_argument("--rows", type=int, default=24)
    p.add_argument("--threshold", type=float, default=0.3)
    p.add_argument("--quiet", action="store_true", help="the summary only")
    args = p.parse_args(argv)

    from memjax.checkpoints import load_model
    from memjax.errors import DataError
    from memjax.sft.batches import make_batch
    from memjax.sft.rows import role_rows
    from memjax.sft.trajectories import read_trajectories
    from memjax.training.logprobs import make_logprob_fn

    try:
        trajectories = read_trajectories(args.trajectories)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return {}
    model = load_model(args.source, param_dtype="float32")
    logprobs = make_logprob_fn(model.cfg)
    rows = role_rows(model.tokenizer, trajectories, args.role, args.rows)
    if not rows:
        print(f"error: {args.trajectories}: no context of role {args.role!r}", file=sys.stderr)
        return {}
    totals, worst, high = [], [], collections.Counter()
    longest = max(len(r.tokens) for r in rows)
    for row in rows:  # one row at a time, padded to a multiple of 64: few compiled shapes
        batch = make_batch([row], [0], model.tokenizer.pad_id, bucket=64, max_len=longest + 64)
        lp = np.asarray(logprobs(model.params, batch["tokens"], batch["token_mask"]))
        trained = np.flatnonzero(row.loss_mask)
        nll = -lp[0, trained]  # [n]: -log p(token | everything before it)
        pieces = [model.tokenizer.decode([int(row.tokens[i])], False) for i in trained]
        totals.append(float(nll.sum()))
        worst.append(float(nll.max()))
        high.update(piece.strip() for piece, n in zip(pieces, nll) if n > args.threshold)
        if not args.quiet:
            print(f"row NLL {nll.sum():.2f} over {len(nll)} tokens, worst {nll.max():.2f}")
            print("   ", _marked(pieces, nll, args.threshold))
    share = float(np.sum(worst) / max(np.sum(totals), 1e-9))
    report = {
        "rows": len(rows),
        "mean_row_nll": round(float(np.mean(totals)), 4),
        "worst_token_share": round(share, 4),
        "tokens_above_threshold": dict(high.most_common(10)),
    }
    print(
        f"{len(rows)} {args.role} rows: mean NLL per row {report['mean_row_nll']:.3f}; the worst "
        f"token of each row carries {100 * share:.0f}% of it"
    )
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
