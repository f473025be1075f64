"""The train step and the log-prob pass with attention by query blocks vs in one piece.

    python tools/bench.py causal_blocks [--rows 4] [--seq_len 1536] [--trained 256] \
        [--shared 0] [--block 256] [--micro_batches 1] [--remat none] [--pairs 3] \
        [--source packaged:smollm2]

`DecoderConfig.attention_query_block` makes the XLA attention score each block of queries
against the keys up to the block's end only (decoder.causal_attention), instead of the whole
T x T square with its upper triangle masked. The rows have the shape of a cold-start SFT or
GRPO row on CPU: `--rows` rows of `--seq_len` random tokens whose last `--trained` are
trained. `--shared P` makes the rows open with the same P tokens and runs them as
rl.shared_prefix does: each micro-batch's common untrained opening once (the P tokens when it
holds several rows, a row's whole prompt when it holds one), then each row's remainder over
those keys (decoder.cached_attention). Both forms run the real GRPO actor step (f32, SGD at
rate 0 so every step sees the same parameters) and the trainer's log-prob pass on the same
rows and give the same loss (printed). Each form's step also reports the working memory XLA
plans for it (temporaries and outputs: the host check of memjax.training.host_memory). After
a warm-up call each, the forms alternate step by step (tools/benchmarks/pairs.py); the ratio is one
piece's seconds over the blocks' (> 1: blocks are faster), the median of the per-pair ratios.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def _rows(vocab: int, rows: int, seq_len: int, trained: int, shared: int) -> dict:
    rng = np.random.default_rng(0)
    tokens = rng.integers(10, vocab, (rows, seq_len)).astype(np.int32)  # [B, T]
    tokens[:, :shared] = tokens[0, :shared]  # a common opening (0 tokens: none)
    loss_mask = np.zeros((rows, seq_len), bool)
    loss_mask[:, seq_len - trained :] = True  # the trained tokens close the row
    old = (-2.0 + 0.1 * rng.normal(size=(rows, seq_len))).astype(np.float32) * loss_mask
    return {
        "tokens": tokens,
        "token_mask": np.ones((rows, seq_len), bool),
        "loss_mask": loss_mask,
        "advantages": rng.normal(size=(rows, 1)).astype(np.float32) * loss_mask,
        "old_logp": old,
    }


def _batch(args, vocab: int) -> dict:
    from memjax.rl import shared_prefix
    from memjax.training.logprobs import position_width, trained_positions

    batch = _rows(vocab, args.rows, args.seq_len, args.trained, args.shared)
    batch.update(trained_positions(batch["loss_mask"], position_width(args.trained, args.seq_len)))
    if args.shared:
        batch, _ = shared_prefix.share_prefixes(
            batch, args.micro_batches, granularity=128, minimum=args.shared
        )
    return batch


def _working_gib(step, state, batch) -> float:
    """The compiled step's working memory in GiB (the call then reuses the compiled program)."""
    from memjax.training.host_memory import working_bytes

    arrays = {k: jnp.asarray(v) for k, v in batch.items()}
    return round(working_bytes(step.jitted(arrays).lower(state, arrays, None).compile()) / 2**30, 2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=1536)
    parser.add_argument("--trained", type=int, default=256)
    parser.add_argument(
        "--shared", type=int, default=0, help="common opening tokens (rl.shared_prefix)"
    )
    parser.add_argument("--block", type=int, default=256, help="the blocked form's query block")
    parser.add_argument("--micro_batches", type=int, default=1)
    parser.add_argument("--remat", default="none", choices=["none", "dots", "full"])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--source", default="packaged:smollm2")


def main(args: argparse.Namespace) -> dict:

    import optax

    from memjax.checkpoints import load_model
    from memjax.rl.losses import PolicyLossConfig
    from memjax.rl.steps import policy_train_step
    from memjax.training.logprobs import make_logprob_fn
    from memjax.training.train_step import init_train_state

    load_before = load_average()
    model = load_model(args.source, with_tokenizer=False, param_dtype="float32")
    batch = _batch(args, model.cfg.vocab_size)
    optimizer = optax.sgd(0.0)  # every step sees the same parameters
    state = init_train_state(model.params, optimizer)
    forms = {"one piece": 0, "blocks": args.block}
    losses, runs, memory = {}, {}, {}
    for name, block in forms.items():
        cfg = dataclasses.replace(model.cfg, attention_query_block=block, remat=args.remat)
        step = policy_train_step(
            cfg, PolicyLossConfig(), optimizer, num_micro_batches=args.micro_batches, donate=False
        )
        logprob_fn = make_logprob_fn(cfg)
        memory[name] = _working_gib(step, state, batch)
        print(f"{name}: the step's working memory {memory[name]} GiB", flush=True)

        def train(step=step, name=name):
            losses[name] = float(jax.block_until_ready(step(state, batch)[1]["loss"]))

        def score(fn=logprob_fn):
            args_ = (batch["tokens"], batch["token_mask"], batch["loss_positions"])
            jax.block_until_ready(fn(model.params, *args_, batch.get("prefix")))

        runs[f"step {name}"], runs[f"logprobs {name}"] = train, score
    for call in runs.values():
        call()  # compiled, outside the timing
    load_after_warmup = load_average()
    comparisons = {}
    for kind in ("step", "logprobs"):
        times = alternate(runs[f"{kind} blocks"], runs[f"{kind} one piece"], args.pairs)
        comparisons[kind] = times.summary()
        print(f"{kind}: one piece / blocks: " + format_summary(comparisons[kind]), flush=True)
    print(f"loss: one piece {losses['one piece']:.6f}, blocks {losses['blocks']:.6f}")
    report = {
        "rows": args.rows,
        "seq_len": args.seq_len,
        "trained_tokens_per_row": args.trained,
        "shared_prefix": int(batch["prefix"].shape[1]) if "prefix" in batch else 0,
        "row_width": int(batch["tokens"].shape[1]),
        "block": args.block,
        "micro_batches": args.micro_batches,
        "remat": args.remat,
        "loss": {name: round(value, 6) for name, value in losses.items()},
        "step_working_gib": memory,
        "comparisons": comparisons,
        "load": [load_before, load_after_warmup, load_average()],
    }
    return report
