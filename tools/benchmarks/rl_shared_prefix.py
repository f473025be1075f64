"""The GRPO update on groups that share their prompt: each micro-batch running it once, timed
against the rows run whole.

    python tools/bench.py rl_shared_prefix <trajectories.jsonl> [--role answer] \
        [--id_contains conv-26] [--prompts 4] [--group_size 4] [--micro_batches 4] \
        [--seq_len 1536] [--pairs 3] [--shared_prefix 256] [--source packaged:smollm2]

The prompts are the first `--prompts` contexts of `--role` in an `sft.make_data` file whose id
contains `--id_contains` (e.g. Memory-R1 answer calls on LoCoMo: ~1,300 prompt tokens), each
taken `--group_size` times with its teacher answer cut at a different length as the samples'
completions, and packed as the RL trainer packs a step's rows (`memjax.rl.rollout.pack`,
right-padded to `--seq_len`). One GRPO update as the trainer makes it, in two forms:
  whole    the reference log-prob pass (`make_logprob_fn`, chunks of 4 rows) and the policy
           step (`policy_train_step`, k3 KL, micro-batched) over the packed rows;
  shared   the same with `rl.shared_prefix` (`memjax.rl.shared_prefix`): rows regrouped, cut
           after the prefix each chunk and micro-batch shares, which runs once.
The optimizer is SGD at rate 0, so every call sees the same parameters; the loss, KL and
reference log-probs of both forms are printed (they agree up to f32 order). After a warm-up
call each, the forms alternate step by step (tools/benchmarks/pairs.py); the ratio is whole's seconds over
shared's (> 1: sharing is faster), the median of the per-pair ratios. The last line is JSON.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def _group_rows(tokenizer, args) -> list:
    """Trajectories: each prompt G times, its answer cut to G lengths between half and all."""
    from memjax.rl.rollout import Context, Trajectory
    from memjax.sft.rows import role_rows
    from memjax.sft.trajectories import read_trajectories

    kept = [t for t in read_trajectories(args.trajectories) if args.id_contains in t.id]
    rows = role_rows(tokenizer, kept, args.role, args.prompts)
    if len(rows) < args.prompts:
        raise SystemExit(f"{args.trajectories}: fewer than {args.prompts} {args.role!r} contexts")
    trajs = []
    for g, row in enumerate(rows):
        start = int(np.flatnonzero(row.loss_mask)[0])
        answer = row.tokens[start:]
        for i in range(args.group_size):
            n = max(1, len(answer) * (args.group_size + i) // (2 * args.group_size))
            ctx = Context()
            ctx.extend(row.tokens[:start], trainable=False)
            ctx.extend(answer[:n], trainable=True, logprobs=[-1.0] * n)
            trajs.append(Trajectory(group=g, contexts=[ctx]))
    return trajs


def _batch(trajs, args, pad_id) -> dict:
    from memjax.rl.rollout import pack
    from memjax.training.logprobs import position_width, trained_positions

    batch = pack(trajs, args.seq_len, pad_id, args.micro_batches)
    if batch["truncated_rows"]:
        raise SystemExit(f"--seq_len {args.seq_len} cuts {batch['truncated_rows']} rows")
    batch.pop("trajectory"), batch.pop("truncated_rows")
    mask = batch["loss_mask"]
    rng = np.random.default_rng(0)
    batch["advantages"] = (rng.normal(size=(len(mask), 1)) * mask).astype(np.float32)
    batch["old_logp"] = batch["sampler_logp"]
    width = position_width(int(mask.sum(axis=1).max()), args.seq_len)
    batch.update(trained_positions(mask, width))
    return batch


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trajectories")
    parser.add_argument("--role", default="answer")
    parser.add_argument("--id_contains", default="")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group_size", type=int, default=4)
    parser.add_argument("--micro_batches", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=1536)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--shared_prefix", type=int, default=256)
    parser.add_argument("--source", default="packaged:smollm2")


def main(args: argparse.Namespace) -> dict:

    import optax

    from memjax.checkpoints import load_model
    from memjax.rl.losses import PolicyLossConfig
    from memjax.rl.shared_prefix import SHARED_PREFIX_GRANULARITY, restore_order, share_prefixes
    from memjax.rl.steps import policy_train_step
    from memjax.training.logprobs import LOGPROB_ROWS_PER_DEVICE, logprob_chunks, make_logprob_fn
    from memjax.training.train_step import init_train_state

    load_before = load_average()
    model = load_model(args.source, param_dtype="float32")
    batch = _batch(_group_rows(model.tokenizer, args), args, model.tokenizer.pad_id)
    B = len(batch["tokens"])
    share = lambda rows, chunks: share_prefixes(
        rows, chunks, granularity=SHARED_PREFIX_GRANULARITY, minimum=args.shared_prefix
    )
    logprob_fn = make_logprob_fn(model.cfg)
    optimizer = optax.sgd(0.0)  # every call sees the same parameters
    loss_cfg = PolicyLossConfig(kl_coef=0.001, kl_kind="k3")
    step = policy_train_step(
        model.cfg, loss_cfg, optimizer, num_micro_batches=args.micro_batches, donate=False
    )
    state = init_train_state(model.params, optimizer)
    results: dict[str, dict] = {}

    def update(name: str, shared: bool):
        def call():
            rows, order = batch, np.arange(B)
            if shared:
                rows, order = share(batch, logprob_chunks(B, LOGPROB_ROWS_PER_DEVICE))
            ref = logprob_fn(
                model.params,
                rows["tokens"],
                rows["token_mask"],
                rows["loss_positions"],
                rows.get("prefix"),
            )  # [B, K]
            ref = restore_order(np.asarray(ref), order)
            full = np.zeros(batch["tokens"].shape, np.float32)
            r, k = np.nonzero(batch["loss_valid"])
            full[r, batch["loss_positions"][r, k]] = ref[r, k]
            mb = {**batch, "ref_logp": full}
            if shared:
                mb, _ = share(mb, args.micro_batches)
            _, metrics = step(state, mb)
            results[name] = {
                "loss": float(jax.block_until_ready(metrics["loss"])),
                "kl": float(metrics["kl"]),
                "ref_logp_sum": float(full.sum()),
                "row_len": int(mb["tokens"].shape[1]),
                "prefix": int(mb["prefix"].shape[1]) if "prefix" in mb else 0,
            }

        return call

    whole, shared = update("whole", False), update("shared", True)
    whole(), shared()  # compiled, outside the timing
    if not results["shared"]["prefix"]:
        raise SystemExit(f"the groups share fewer than {args.shared_prefix} untrained tokens")
    load_after_warmup = load_average()
    summary = alternate(shared, whole, args.pairs).summary()
    print("whole / shared: " + format_summary(summary), flush=True)
    tokens = int(batch["token_mask"].sum())
    report = {
        "rows": B,
        "row_tokens": tokens,
        "trained_tokens": int(batch["loss_mask"].sum()),
        "seq_len": args.seq_len,
        "micro_batches": args.micro_batches,
        "forms": results,
        "tokens_per_s": {
            "whole": round(tokens / summary["peer_median_s"], 1),
            "shared": round(tokens / summary["memjax_median_s"], 1),
        },
        "comparison": summary,
        "load": [load_before, load_after_warmup, load_average()],
    }
    print(
        f"{B} rows, {tokens} tokens, {results['shared']['prefix']} shared per micro-batch; "
        f"tokens/s whole {report['tokens_per_s']['whole']}, shared "
        f"{report['tokens_per_s']['shared']}; loss whole {results['whole']['loss']:.6f}, "
        f"shared {results['shared']['loss']:.6f}"
    )
    return report
