"""Forward throughput of memjax vs `transformers` on the packaged SmolLM2, in one run.

    python tools/bench_forward.py [--batch 8] [--seq 512] [--repeats 3]

Both run in f32 on the same CPU threads and the same token batch. Prints load time, compile time
and tokens/s for each, and the ratio; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from memjax.checkpoints import load_model, packaged
    from memjax.models import decoder

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
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
    memjax_s = _best_of(run, args.repeats)

    torch_ids = torch.tensor(tokens, dtype=torch.long)

    def run_torch():
        with torch.no_grad():
            reference(torch_ids).logits.float()

    run_torch()  # warm-up
    torch_s = _best_of(run_torch, args.repeats)

    result = {
        "batch": args.batch,
        "seq": args.seq,
        "threads": threads,
        "memjax_load_s": round(memjax_load_s, 2),
        "hf_load_s": round(hf_load_s, 2),
        "memjax_compile_s": round(memjax_compile_s, 2),
        "memjax_tok_s": round(n_tokens / memjax_s, 1),
        "hf_tok_s": round(n_tokens / torch_s, 1),
        "ratio": round(torch_s / memjax_s, 3),
    }
    print(f"packaged SmolLM2-135M load: memjax {memjax_load_s:.1f}s, transformers {hf_load_s:.1f}s")
    print(f"memjax compile {memjax_compile_s:.1f}s")
    print(
        f"forward {args.batch}x{args.seq}: memjax {result['memjax_tok_s']:.0f} tok/s, "
        f"transformers {result['hf_tok_s']:.0f} tok/s, ratio {result['ratio']:.2f}"
    )
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
