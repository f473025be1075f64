"""A batched call prefilled in column chunks against the same call prefilled in one piece:
time ratio (alternated) and each form's peak memory (each in a process of its own).

    python tools/bench.py prefill_chunks [--batch 16] [--memories 30] [--chunk 256] \
        [--new-tokens 64] [--pairs 3]

The packaged SmolLM2-135M-Instruct, greedy, `--batch` Memory-R1 answer-agent prompts over
`--memories` memories per speaker (30, the prompt's limit, gives ~2,050 tokens: the size of a
LoCoMo answer prompt over a whole conversation's bank). Each form first runs once in a child
process of its own, whose peak RSS (ru_maxrss) is that form's memory; then both warm up here
and alternate call by call (tools/benchmarks/pairs.py): the ratio is the one-piece call's seconds over
the chunked call's (> 1: chunks are faster). Both forms must produce the same completions
(checked, and printed). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average
from tools.benchmarks.shared_prefix import _turns


def answer_prompts(tokenizer, batch: int, memories: int, seed: int = 0) -> list[list[int]]:
    """`batch` answer-agent prompts, each over `memories` random turns per speaker."""
    from memjax.agents.memory_r1.answer_prompt import render_answer_prompt

    turns, questions = _turns(seed)
    rng = np.random.default_rng(seed)
    prompts = []
    for b in range(batch):
        picks = [rng.choice(len(turns), memories, replace=False) for _ in range(2)]
        a, c = ([(turns[i][2], turns[i][1]) for i in pick] for pick in picks)
        text = render_answer_prompt("Rosa", a, "Sam", c, questions[b % len(questions)])
        prompts.append(tokenizer.chat([{"role": "user", "content": text}]))
    return prompts


def _setup(args):
    from memjax.checkpoints import load_model
    from memjax.sampling import SamplingParams, prepare_params, sample

    model = load_model("packaged:smollm2")
    params = prepare_params(model.params, model.cfg)
    prompts = answer_prompts(model.tokenizer, args.batch, args.memories)
    kw = dict(eos_ids=(), pad_id=model.tokenizer.pad_id)  # every row runs the full budget

    def call(chunk):
        sp = SamplingParams(max_new_tokens=args.new_tokens, greedy=True, prefill_chunk=chunk)
        return lambda: np.asarray(sample(params, model.cfg, prompts, sp, 0, **kw).tokens)

    return prompts, call


def _peak_gb(args, chunk: int) -> float:
    """Peak RSS of a fresh process that loads the model and makes the call once."""
    bench = Path(__file__).resolve().parents[1] / "bench.py"
    argv = [sys.executable, str(bench), "prefill_chunks", *_forwarded(args)]
    argv += ["--chunk", str(chunk), "--peak-only"]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_gib"]


def _forwarded(args) -> list[str]:
    return [
        *("--batch", str(args.batch)),
        *("--memories", str(args.memories)),
        *("--new-tokens", str(args.new_tokens)),
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--memories", type=int, default=30)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--peak-only", action="store_true", help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> dict:

    if args.peak_only:
        _setup(args)[1](args.chunk)()
        return {"peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}  # KiB
    before = load_average()
    peaks = {"chunked_gib": _peak_gb(args, args.chunk), "one_piece_gib": _peak_gb(args, 0)}
    prompts, call = _setup(args)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; batch {args.batch} prompts of "
          f"{min(map(len, prompts))}-{max(map(len, prompts))} tokens, chunk {args.chunk}, "
          f"{args.new_tokens} new tokens per row")  # fmt: skip
    same = np.array_equal(call(args.chunk)(), call(0)())  # warm-up, and the equality check
    times = alternate(call(args.chunk), call(0), args.pairs)
    row = {"same_completions": bool(same), **{k: round(v, 2) for k, v in peaks.items()}}
    row.update(times.summary())
    print(f"chunked vs one piece: {format_summary(row)}; peak RSS {row['chunked_gib']} GiB "
          f"chunked, {row['one_piece_gib']} GiB in one piece")  # fmt: skip
    report = {**row, "load_before": before, "load_after": load_average()}
    return report
