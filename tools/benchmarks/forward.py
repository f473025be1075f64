"""Forward throughput of memjax vs `transformers` on the packaged SmolLM2, in one run.

    python tools/bench.py forward [--batch 8] [--seq 512] [--pairs 5]

Both run in f32 on the same CPU threads and the same token batch. After a warm-up call each, the
two forwards alternate (memjax, transformers, memjax, ...) and the ratio is the median of the
per-pair ratios (tools/benchmarks/pairs.py) with its spread and the load average before and after. Prints
load time, compile time and tokens/s for each; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--pairs", type=int, default=5, help="memjax/transformers call pairs")


def main(args: argparse.Namespace) -> dict:

    import torch
    from transformers import AutoModelForCausalLM

    from memjax.checkpoints import load_model, packaged
    from memjax.models import decoder

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    load_before = load_average()
    path = packaged.smollm2_gguf()

    t0 = time.perf_counter()
    model = load_model(packaged.SMOLLM2, with_tokenizer=False)
    jax.block_until_ready(model.params)
    memjax_load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    hf_load_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, model.cfg.vocab_size, (args.batch, args.seq)).astype(np.int32)
    positions = jnp.broadcast_to(jnp.arange(args.seq, dtype=jnp.int32), tokens.shape)
    ids = jnp.asarray(tokens)
    n_tokens = args.batch * args.seq

    run = lambda: jax.block_until_ready(
        decoder.jit_forward(model.params, ids, positions, model.cfg)[0]
    )
    t0 = time.perf_counter()
    run()
    memjax_compile_s = time.perf_counter() - t0

    torch_ids = torch.tensor(tokens, dtype=torch.long)

    def run_torch():
        with torch.no_grad():
            reference(torch_ids).logits.float()

    run_torch()  # warm-up
    times = alternate(run, run_torch, args.pairs)
    paired = times.summary()
    memjax_s, torch_s = paired["memjax_median_s"], paired["peer_median_s"]

    result = {
        "batch": args.batch,
        "seq": args.seq,
        "threads": threads,
        "memjax_load_s": round(memjax_load_s, 2),
        "hf_load_s": round(hf_load_s, 2),
        "memjax_compile_s": round(memjax_compile_s, 2),
        "memjax_tok_s": round(n_tokens / memjax_s, 1),
        "hf_tok_s": round(n_tokens / torch_s, 1),
        **paired,
        "load_before": load_before,
        "load_after": load_average(),
    }
    print(f"packaged SmolLM2-135M load: memjax {memjax_load_s:.1f}s, transformers {hf_load_s:.1f}s")
    print(f"memjax compile {memjax_compile_s:.1f}s")
    print(
        f"forward {args.batch}x{args.seq}: memjax {result['memjax_tok_s']:.0f} tok/s, "
        f"transformers {result['hf_tok_s']:.0f} tok/s"
    )
    print(f"{format_summary(paired)}; load average {load_before} -> {result['load_after']}")
    return result
