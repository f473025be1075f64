"""Sampling throughput of memjax's on-device sampler vs `transformers` generate, in one run.

    python tools/bench_sampling.py [--batches 1,8,32] [--new-tokens 128] [--repeats 1]

The packaged SmolLM2-135M-Instruct in f32, greedy, chat prompts of different lengths, exactly
`--new-tokens` new tokens per row (EOS ignored on both sides), torch on as many threads as the
machine has cores (XLA's CPU client uses them all). Compile time is reported separately; the
timed runs start from text-free token ids and include prefill. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

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


def _prompts(tokenizer, batch: int) -> list[list[int]]:
    return [
        tokenizer.chat([{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}])
        for i in range(batch)
    ]


def bench_memjax(params, cfg, prompts, new_tokens: int, repeats: int) -> tuple[float, float]:
    """(seconds per run, compile seconds)."""
    from memjax.sampling import SamplingParams, sample

    sampling = SamplingParams(max_new_tokens=new_tokens, greedy=True)

    def run():
        out = sample(params, cfg, prompts, sampling, 0, eos_ids=[])
        assert (out.lengths == new_tokens).all()
        return out

    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    best = min(times)
    return best, max(first - best, 0.0)


def bench_hf(model, prompts, pad_id: int, new_tokens: int, repeats: int) -> float:
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

    def run(n):
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=pad_id,
            )
        assert out.shape[1] == width + n

    run(2)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(new_tokens)
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    from memjax.checkpoints import load_model, packaged
    from memjax.sampling import prepare_params

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch threads {threads}")
    model = load_model("packaged:smollm2")
    params = prepare_params(model.params, model.cfg)
    path = packaged.smollm2_gguf()
    hf = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()

    results = {}
    for batch in [int(b) for b in args.batches.split(",")]:
        prompts = _prompts(model.tokenizer, batch)
        n = batch * args.new_tokens
        mj, compile_s = bench_memjax(params, model.cfg, prompts, args.new_tokens, args.repeats)
        hf_s = bench_hf(hf, prompts, model.tokenizer.pad_id, args.new_tokens, args.repeats)
        row = {
            "memjax_tok_s": round(n / mj, 2),
            "hf_tok_s": round(n / hf_s, 2),
            "ratio": round(hf_s / mj, 3),
            "memjax_compile_s": round(compile_s, 2),
            "prompt_tokens": [min(map(len, prompts)), max(map(len, prompts))],
        }
        results[str(batch)] = row
        print(
            f"batch {batch:3d}: memjax {row['memjax_tok_s']:8.1f} tok/s "
            f"(compile {compile_s:.1f}s), transformers {row['hf_tok_s']:8.1f} tok/s, "
            f"ratio {row['ratio']:.2f}",
            flush=True,
        )
    # torch's OpenMP threads degrade sharply when other processes compete for the cores, so
    # ratios measured on a busy machine flatter memjax: the load average is part of the result.
    load = [round(x, 2) for x in os.getloadavg()]
    print(f"load average during the run (1, 5, 15 min): {load}")
    summary = {
        "batch": results,
        "new_tokens": args.new_tokens,
        "threads": threads,
        "load_avg": load,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
