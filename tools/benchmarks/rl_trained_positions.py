"""The RL actor step and its old-log-prob pass, scoring every position or the trained ones only.

    python tools/bench.py rl_trained_positions [--rows 4] [--seq_len 2048] [--trained 128] \
        [--micro_batches 2] [--pairs 3] [--source packaged:smollm2]

The rows have the shape of a Memory-R1 GRPO step on CPU (configs/reproduce_cpu.py: 2,048-token
rows, a manager or answer completion of at most 128 tokens after a long prompt): `--rows` rows,
each a prompt filling the rest of the row and `--trained` trained tokens at its end. They go
through the real GRPO actor step (`policy_train_step`, f32, the paper's clipping and k3 KL,
SGD at rate 0 so every step sees the same parameters) and the trainer's old / reference
log-prob pass (`make_logprob_fn`) in two forms:
  all      every position scored against the vocabulary, masked by loss_mask (the step before
           it took loss_positions);
  trained  loss_positions / loss_valid from `trained_positions`, as the trainer now builds
           them: only the trained positions go through the unembedding.
Both give the same loss (printed). After a warm-up call each, the two forms alternate step by
step (tools/benchmarks/pairs.py); the ratio is all's seconds over trained's (> 1: scoring trained
positions only is faster), the median of the per-pair ratios. The last line is one JSON object.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def _rows(vocab: int, rows: int, seq_len: int, trained: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(10, vocab, (rows, seq_len)).astype(np.int32)  # [B, T]
    token_mask = np.ones((rows, seq_len), bool)
    loss_mask = np.zeros((rows, seq_len), bool)
    loss_mask[:, seq_len - trained :] = True  # the completion closes the row
    old = (-2.0 + 0.1 * rng.normal(size=(rows, seq_len))).astype(np.float32) * loss_mask
    adv = rng.normal(size=(rows, 1)).astype(np.float32) * loss_mask
    return {
        "tokens": tokens,
        "token_mask": token_mask,
        "loss_mask": loss_mask,
        "advantages": adv,
        "old_logp": old,
        "ref_logp": old,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=2048)
    parser.add_argument("--trained", type=int, default=128)
    parser.add_argument("--micro_batches", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--source", default="packaged:smollm2")


def main(args: argparse.Namespace) -> dict:

    import optax

    from memjax.checkpoints import load_model
    from memjax.rl.losses import PolicyLossConfig
    from memjax.rl.steps import policy_train_step
    from memjax.training.logprobs import make_logprob_fn, position_width, trained_positions
    from memjax.training.train_step import init_train_state

    load_before = load_average()
    model = load_model(args.source, param_dtype="float32")
    plain = _rows(model.cfg.vocab_size, args.rows, args.seq_len, args.trained)
    width = position_width(args.trained, args.seq_len)
    positioned = {**plain, **trained_positions(plain["loss_mask"], width)}
    optimizer = optax.sgd(0.0)  # every step sees the same parameters
    loss_cfg = PolicyLossConfig(kl_coef=0.001, kl_kind="k3")
    step = policy_train_step(
        model.cfg, loss_cfg, optimizer, num_micro_batches=args.micro_batches, donate=False
    )
    state = init_train_state(model.params, optimizer)
    logprob_fn = make_logprob_fn(model.cfg)
    losses = {}

    def train(name, batch):
        def call():
            _, metrics = step(state, batch)
            losses[name] = float(jax.block_until_ready(metrics["loss"]))

        return call

    def score(at):
        return lambda: jax.block_until_ready(
            logprob_fn(model.params, plain["tokens"], plain["token_mask"], at)
        )

    runs = {
        "step all": train("all", plain),
        "step trained": train("trained", positioned),
        "logprobs all": score(None),
        "logprobs trained": score(positioned["loss_positions"]),
    }
    for call in runs.values():
        call()  # compiled, outside the timing
    load_after_warmup = load_average()
    comparisons = {}
    for kind in ("step", "logprobs"):
        summary = alternate(runs[f"{kind} trained"], runs[f"{kind} all"], args.pairs).summary()
        comparisons[kind] = summary
        print(f"{kind}: all / trained: " + format_summary(summary), flush=True)
    report = {
        "rows": args.rows,
        "seq_len": args.seq_len,
        "trained_tokens_per_row": args.trained,
        "positions_width": width,
        "micro_batches": args.micro_batches,
        "loss": {name: round(value, 6) for name, value in losses.items()},
        "comparisons": comparisons,
        "load": [load_before, load_after_warmup, load_average()],
    }
    print(f"loss: all {losses['all']:.6f}, trained {losses['trained']:.6f}")
    return report
