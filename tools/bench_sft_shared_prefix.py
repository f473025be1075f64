"""The SFT step on rows that share a prompt: the shared prefix run once against the plain batch.

    python tools/bench_sft_shared_prefix.py <trajectories.jsonl> [--role manager] [--rows 4] \
        [--micro_batches 1] [--pairs 3] [--shared_prefix 256] [--source packaged:smollm2]

The rows are the first `--rows` contexts of `--role` in an `sft.make_data` file (e.g. Memory-R1
manager calls: ~1,100-1,300 prompt tokens, ~800 of them the same fixed instructions), rendered
through the model's chat template as `sft.train` renders them. The same rows go through the real
SFT step (`sft_train_step`, f32, token-mean NLL, SGD at rate 0 so both steps see the same
parameters) as a plain right-padded batch and as a shared-prefix batch (`make_batch(
share_prefix=...)`). After a warm-up call each, the two alternate step by step (tools/_pairs.py);
the ratio is plain seconds over shared seconds (> 1: sharing is faster), the median of the
per-pair ratios. Prints both losses (they must agree) and tokens/s; the last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np
from _pairs import alternate, format_summary, load_average


def _rows(tokenizer, path: str, role: str, count: int) -> list:
    from memjax.sft.rows import context_row
    from memjax.sft.trajectories import read_trajectories

    rows = []
    for t, trajectory in enumerate(read_trajectories(path)):
        if trajectory.role != role:
            continue
        for messages in trajectory.contexts:
            rows.append(context_row(tokenizer, messages, t))
            if len(rows) == count:
                return rows
    raise SystemExit(f"{path}: fewer than {count} contexts of role {role!r}")


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trajectories")
    p.add_argument("--role", default="manager")
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--micro_batches", type=int, default=1)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--shared_prefix", type=int, default=256)
    p.add_argument("--bucket", type=int, default=64)
    p.add_argument("--source", default="packaged:smollm2")
    args = p.parse_args(argv)

    import optax

    from memjax.checkpoints import load_model
    from memjax.rl.train_step import init_train_state
    from memjax.sft.batches import make_batch
    from memjax.sft.step import sft_train_step

    load_before = load_average()
    model = load_model(args.source, param_dtype="float32")
    rows = _rows(model.tokenizer, args.trajectories, args.role, args.rows)
    shape = dict(bucket=args.bucket, max_len=max(len(r.tokens) for r in rows) + args.bucket)
    plain = make_batch(rows, range(len(rows)), model.tokenizer.pad_id, **shape)
    shared = make_batch(
        rows, range(len(rows)), model.tokenizer.pad_id, share_prefix=args.shared_prefix, **shape
    )
    if "prefix" not in shared:
        raise SystemExit(f"the rows share fewer than {args.shared_prefix} untrained tokens")
    prefix = shared["prefix"].shape[1]
    optimizer = optax.sgd(0.0)  # both steps see the same parameters
    step = sft_train_step(model.cfg, optimizer, num_micro_batches=args.micro_batches, donate=False)
    state = init_train_state(model.params, optimizer)
    losses = {}

    def run(name, batch):
        def call():
            _, metrics = step(state, batch)
            losses[name] = float(jax.block_until_ready(metrics["loss"]))

        return call

    run_plain, run_shared = run("plain", plain), run("shared", shared)
    run_plain()
    run_shared()  # compiled, outside the timing
    times = alternate(run_shared, run_plain, args.pairs)  # A = shared, B = plain
    summary = times.summary()
    row_tokens = int(plain["token_mask"].sum())
    report = {
        "rows": len(rows),
        "row_tokens": row_tokens,
        "shared_prefix_tokens": prefix,
        "plain_row_len": int(plain["tokens"].shape[1]),
        "shared_suffix_len": int(shared["tokens"].shape[1]),
        "micro_batches": args.micro_batches,
        "loss_plain": losses["plain"],
        "loss_shared": losses["shared"],
        "plain_tokens_per_s": round(row_tokens / summary["peer_median_s"], 1),
        "shared_tokens_per_s": round(row_tokens / summary["memjax_median_s"], 1),
        **summary,
        "load_before": load_before,
        "load_after": load_average(),
    }
    print(
        f"{len(rows)} {args.role} rows, {row_tokens} tokens, {prefix} shared: plain "
        f"{summary['peer_median_s']:.1f} s ({report['plain_tokens_per_s']} tok/s), shared "
        f"{summary['memjax_median_s']:.1f} s ({report['shared_tokens_per_s']} tok/s); "
        f"loss {losses['plain']:.6f} vs {losses['shared']:.6f}"
    )
    print("plain / shared " + format_summary(summary))
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
