"""The SFT step on rows that share a prompt: shared prefix and trained-token scoring, timed.

    python tools/bench.py sft_shared_prefix <trajectories.jsonl> [--role manager] [--rows 4] \
        [--micro_batches 1] [--pairs 3] [--shared_prefix 256] [--source packaged:smollm2]

The rows are the first `--rows` contexts of `--role` in an `sft.make_data` file (e.g. Memory-R1
manager calls: ~1,200 tokens, ~830 of them the same system turn and instructions, ~70 trained),
rendered through the model's chat template as `sft.train` renders them. The same rows go through
the real SFT step (`sft_train_step`, f32, token-mean NLL, SGD at rate 0 so every step sees the
same parameters) in three forms:
  all        every position scored against the vocabulary (loss_positions = all of them, the
             untrained ones masked), as the step did before it scored trained tokens only;
  trained    the plain batch (`make_batch`): only the trained positions are scored;
  shared     `make_batch(share_prefix=...)`: the common prefix runs once per micro-batch.
All three give the same loss (printed). After a warm-up call each, two comparisons alternate
step by step (tools/benchmarks/pairs.py): trained against all, and shared against trained; each ratio is
the slower form's seconds over the faster's (> 1: the newer form is faster), the median of the
per-pair ratios. The last line is one JSON object.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def _rows(tokenizer, path: str, role: str, count: int) -> list:
    from memjax.sft.rows import role_rows
    from memjax.sft.trajectories import read_trajectories

    rows = role_rows(tokenizer, read_trajectories(path), role, count)
    if len(rows) < count:
        raise SystemExit(f"{path}: fewer than {count} contexts of role {role!r}")
    return rows


def _all_positions(batch: dict) -> dict:
    """The batch with every position scored (the untrained ones masked out of the loss)."""
    B, L = batch["tokens"].shape
    positions = np.tile(np.arange(L, dtype=np.int32), (B, 1))
    return {**batch, "loss_positions": positions, "loss_valid": batch["loss_mask"].copy()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trajectories")
    parser.add_argument("--role", default="manager")
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--micro_batches", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--shared_prefix", type=int, default=256)
    parser.add_argument("--bucket", type=int, default=64)
    parser.add_argument("--source", default="packaged:smollm2")


def main(args: argparse.Namespace) -> dict:

    import optax

    from memjax.checkpoints import load_model
    from memjax.sft.batches import make_batch
    from memjax.sft.step import sft_train_step
    from memjax.training.train_step import init_train_state

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
    optimizer = optax.sgd(0.0)  # every step sees the same parameters
    step = sft_train_step(model.cfg, optimizer, num_micro_batches=args.micro_batches, donate=False)
    state = init_train_state(model.params, optimizer)
    losses = {}

    def run(name, batch):
        def call():
            _, metrics = step(state, batch)
            losses[name] = float(jax.block_until_ready(metrics["loss"]))

        return call

    batches = {"all": _all_positions(plain), "trained": plain, "shared": shared}
    runs = {name: run(name, batch) for name, batch in batches.items()}
    for call in runs.values():
        call()  # compiled, outside the timing
    load_after_warmup = load_average()
    comparisons = {}
    for new, old in (("trained", "all"), ("shared", "trained")):
        summary = alternate(runs[new], runs[old], args.pairs).summary()
        comparisons[f"{old}/{new}"] = summary
        print(f"{old} / {new}: " + format_summary(summary), flush=True)
    row_tokens = int(plain["token_mask"].sum())
    seconds = {
        "all": comparisons["all/trained"]["peer_median_s"],
        "trained": comparisons["trained/shared"]["peer_median_s"],
        "shared": comparisons["trained/shared"]["memjax_median_s"],
    }
    report = {
        "rows": len(rows),
        "row_tokens": row_tokens,
        "trained_tokens": int(plain["loss_mask"].sum()),
        "shared_prefix_tokens": prefix,
        "plain_row_len": int(plain["tokens"].shape[1]),
        "shared_suffix_len": int(shared["tokens"].shape[1]),
        "micro_batches": args.micro_batches,
        "loss": {name: round(value, 6) for name, value in losses.items()},
        "tokens_per_s": {k: round(row_tokens / v, 1) for k, v in seconds.items()},
        "comparisons": comparisons,
        "load": [load_before, load_after_warmup, load_average()],
    }
    print(
        f"{len(rows)} {args.role} rows, {row_tokens} tokens, {prefix} shared; tokens/s "
        + ", ".join(f"{k} {v}" for k, v in report["tokens_per_s"].items())
        + "; loss "
        + ", ".join(f"{k} {v:.6f}" for k, v in losses.items())
    )
    return report
