"""Decoding speed of memjax's sampler (f32 and bf16 weights) vs `transformers` generate, against
the weight-read floor, and a GRPO-like variable-length workload with and without compaction.

    python tools/bench.py sampling [--batches 1,8] [--new-tokens 64] [--pairs 5]
                                   [--workload-pairs 3] [--workload-new-tokens 128]

The packaged SmolLM2-135M-Instruct, greedy, chat prompts of different lengths, exactly
`--new-tokens` new tokens per row (EOS ignored on both sides); torch on as many threads as the
machine has cores (XLA's CPU client uses them all). Each round runs every contender once, in
an order that rotates round to round, and ratios are taken within a round (per-pair), so load
from other processes that comes and goes hits both sides of a ratio alike; the median of the
per-round ratios and their spread (min, max) are reported, with the load average before and
after. ms/step is a whole call (prefill included) over its new tokens.

The floor of a decode step is reading every weight once: weight bytes / the bandwidth of a
large JAX reduction measured in the same run. `gemm_ms` is the step's GEMMs alone (every weight
matrix times a [batch, Din] activation in one program): at a few rows on a small CPU the GEMM
kernels, not the bandwidth, bound a step, and `over_gemms` is the step's distance from them.
The workload is 8 prompts x 4 samples at temperature 1 with the real EOS (questions asking for
one word up to a long story, so rows stop from a few tokens to the budget), static batch vs
compaction; useful tokens/s counts only the tokens rows produced. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from tools.benchmarks.pairs import load_average, paired_ratio, rotate

QUESTIONS = [
    "What is the capital of France?",
    "Give me one tip for remembering people's names.",
    "Explain in two sentences why the sky is blue.",
    "Write a short poem about a lighthouse keeper who collects memories.",
    "What are three good habits for a software engineer?",
    "Summarise the plot of a heist movie in one paragraph.",
    "How do bees communicate where flowers are?",
    "List some ways to reduce food waste at home, with a reason for each.",
]

WORKLOAD = [
    "Answer with one word: what colour is the sky on a clear day?",
    "Reply with a single number: how many legs does a spider have?",
    "Name the capital of Italy, nothing else.",
    "In one sentence, what is photosynthesis?",
    "Give two tips for sleeping better.",
    "Explain in a short paragraph how a bicycle stays upright.",
    "Write a detailed story about a robot who learns to paint, with a beginning, middle and end.",
    "Describe, step by step and in detail, how to bake bread at home.",
]


def read_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes/s of a jitted sum over a large f32 array (the best of `repeats`)."""
    x = jnp.ones((megabytes * 2**20 // 4,), jnp.float32)
    total = jax.jit(jnp.sum)
    total(x).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        total(x).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return x.nbytes / best


def gemm_step_ms(params, batch: int, repeats: int = 10) -> float:
    """ms for a decode step's GEMMs alone: every weight matrix of `params` (prepared, per-layer)
    times a [batch, Din] activation, the unembedding included, in one jitted program (the best
    of `repeats`). At a few rows this, not the weight-read floor, bounds a step on this CPU:
    small-M GEMMs stream weights far below the memory bandwidth."""
    mats = [
        a.reshape(a.shape[0], -1) if name != "o" else a.reshape(-1, a.shape[-1])
        for layer in params["layers"]
        for name, a in layer.items()
        if name in ("q", "k", "v", "o", "gate", "up", "down")
    ]
    table = params["embed"]  # [V, D]: the tied unembedding, contracted as stored

    def step(mats, table):
        total = jnp.float32(0)
        for w in mats:
            x = jnp.ones((batch, w.shape[0]), w.dtype)
            total += jnp.sum(jnp.dot(x, w, preferred_element_type=jnp.float32))
        x = jnp.ones((batch, table.shape[1]), table.dtype)
        return total + jnp.sum(jnp.einsum("bd,vd->bv", x, table))

    run = jax.jit(step)
    run(mats, table).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(mats, table).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def weight_bytes(params) -> int:
    """Bytes a decode step reads: every weight once (a tied embedding serves the logits; the
    lookup reads only a row per token)."""
    return sum(a.nbytes for a in jax.tree.leaves(params))


def _chat(tokenizer, questions, batch: int) -> list[list[int]]:
    return [
        tokenizer.chat([{"role": "user", "content": questions[i % len(questions)]}])
        for i in range(batch)
    ]


def memjax_call(params, cfg, prompts, sampling, rng=0, **kw) -> Callable[[], object]:
    from memjax.sampling import sample

    def run():
        return sample(params, cfg, prompts, sampling, rng, **kw)

    return run


def hf_call(model, prompts, pad_id: int, new_tokens: int) -> Callable[[], object]:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def run():
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=pad_id,
            )
        assert out.shape[1] == width + new_tokens
        return out

    return run


def bench_batch(model, variants, hf, batch, new_tokens, pairs) -> dict:
    from memjax.sampling import SamplingParams

    prompts = _chat(model.tokenizer, QUESTIONS, batch)
    contenders = {"hf": hf_call(hf, prompts, model.tokenizer.pad_id, new_tokens)}
    compile_s = {}
    for name, (params, dtype) in variants.items():
        sampling = SamplingParams(
            max_new_tokens=new_tokens, greedy=True, weight_dtype=dtype, compaction=False
        )
        run = memjax_call(params, model.cfg, prompts, sampling, eos_ids=[])
        t0 = time.perf_counter()
        out = run()  # compiles
        compile_s[name] = round(time.perf_counter() - t0, 1)
        assert (out.lengths == new_tokens).all()
        contenders[name] = run
    contenders["hf"]()  # warm-up
    times = rotate(contenders, pairs)
    row = {
        "ms_per_step": {
            n: round(1e3 * statistics.median(t) / new_tokens, 1) for n, t in times.items()
        },
        "first_call_s": compile_s,
        "prompt_tokens": [min(map(len, prompts)), max(map(len, prompts))],
    }
    for name in variants:
        row[f"{name}_vs_hf"] = paired_ratio(times["hf"], times[name])
    if len(variants) == 2:
        a, b = variants
        row[f"{b}_vs_{a}"] = paired_ratio(times[a], times[b])
    return row


def bench_workload(model, params, dtype, new_tokens, pairs) -> dict:
    from memjax.sampling import SamplingParams

    prompts = _chat(model.tokenizer, WORKLOAD, len(WORKLOAD))
    base = SamplingParams(max_new_tokens=new_tokens, temperature=1.0, weight_dtype=dtype)
    runs, outs = {}, {}
    for name, compaction in (("static", False), ("compaction", True)):
        sampling = dataclasses.replace(base, compaction=compaction)
        runs[name] = memjax_call(
            params,
            model.cfg,
            prompts,
            sampling,
            jax.random.key(0),
            eos_ids=model.tokenizer.eos_ids,
            group_size=4,
            pad_id=model.tokenizer.pad_id,
        )
        outs[name] = runs[name]()  # compiles (compaction: one program per bucket it reaches)
    same = bool((outs["static"].tokens == outs["compaction"].tokens).all())
    lengths = outs["static"].lengths
    useful = int(lengths.sum())
    times = rotate(runs, pairs)
    return {
        "rows": int(len(lengths)),
        "lengths": {
            "min": int(lengths.min()),
            "median": float(np.median(lengths)),
            "max": int(lengths.max()),
        },
        "useful_tokens": useful,
        "useful_tok_s": {n: round(useful / statistics.median(t), 1) for n, t in times.items()},
        "compaction_speedup": paired_ratio(times["static"], times["compaction"]),
        "batch_sizes": list(outs["compaction"].batch_sizes),
        "token_identical": same,
        "weight_dtype": dtype,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", default="1,8", help="'' skips the per-batch part")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--workload-pairs", type=int, default=3, help="0 skips the workload")
    parser.add_argument("--workload-new-tokens", type=int, default=128)
    parser.add_argument("--workload-dtype", default="auto")


def main(args: argparse.Namespace) -> dict:

    import torch
    from transformers import AutoModelForCausalLM

    from memjax.checkpoints import load_model, packaged
    from memjax.sampling import prepare_params
    from memjax.sampling.weights import cast_matrices

    load_before = load_average()
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch threads {threads}")
    model = load_model("packaged:smollm2")
    f32 = prepare_params(model.params, model.cfg)
    variants = {"f32": (f32, "stored"), "bf16": (cast_matrices(f32, jnp.bfloat16), "stored")}
    path = packaged.smollm2_gguf()
    hf = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()

    bandwidth = read_bandwidth()
    floors = {
        name: round(1e3 * weight_bytes(p) / bandwidth, 1) for name, (p, _) in variants.items()
    }
    print(f"read bandwidth {bandwidth / 1e9:.1f} GB/s; weight-read floor ms/step {floors}")
    results = {}
    for batch in [int(b) for b in args.batches.split(",") if b.strip()]:
        row = bench_batch(model, variants, hf, batch, args.new_tokens, args.pairs)
        row["over_floor"] = {n: round(row["ms_per_step"][n] / floors[n], 2) for n in variants}
        row["gemm_ms"] = {n: round(gemm_step_ms(p, batch), 1) for n, (p, _) in variants.items()}
        row["over_gemms"] = {
            n: round(row["ms_per_step"][n] / row["gemm_ms"][n], 2) for n in variants
        }
        results[str(batch)] = row
        print(f"batch {batch}: {json.dumps(row)}", flush=True)
    workload = None
    if args.workload_pairs > 0:
        workload = bench_workload(
            model, f32, args.workload_dtype, args.workload_new_tokens, args.workload_pairs
        )
        print(f"workload: {json.dumps(workload)}", flush=True)
    # torch's OpenMP threads degrade sharply when other processes compete for the cores, so a
    # busy machine moves the ratios even when alternated: the load average is part of the result.
    summary = {
        "batch": results,
        "new_tokens": args.new_tokens,
        "pairs": args.pairs,
        "read_bandwidth_gb_s": round(bandwidth / 1e9, 2),
        "floor_ms_per_step": floors,
        "weight_mb": {n: round(weight_bytes(p) / 1e6, 1) for n, (p, _) in variants.items()},
        "workload": workload,
        "threads": threads,
        "load_avg_before": load_before,
        "load_avg_after": load_average(),
    }
    return summary
