"""Compare memjax's logits with `transformers`' on the same checkpoint.

    python tools/check_logits.py /models/Qwen2.5-1.5B-Instruct
    python tools/check_logits.py packaged:smollm2 --prompts prompts.txt --tol 1e-3

Runs both in f32 on a set of prompts (built in, or one per line from --prompts; random token ids
when the checkpoint has no tokenizer) and prints the max abs logit difference, the mean KL
divergence KL(transformers || memjax) per token, and top-1 agreement. The last line is one JSON
object; the exit status is 1 when the max abs difference exceeds --tol.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np

DEFAULT_PROMPTS = [
    "What is the capital of France?",
    "Summarise the plot of Romeo and Juliet in one sentence.",
    "Remember that my sister's dog is called Biscuit. What is the dog's name?",
    "List three prime numbers.",
]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def load_transformers(path: Path):
    import torch
    from transformers import AutoModelForCausalLM

    if path.suffix == ".gguf":
        return AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        ).eval()
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def prompt_batches(model, prompts: list[str], seed: int) -> list[list[int]]:
    if model.tokenizer is not None:
        return [model.tokenizer.chat([{"role": "user", "content": p}]) for p in prompts]
    rng = np.random.default_rng(seed)
    return [rng.integers(0, model.cfg.vocab_size, n).tolist() for n in (17, 33, 64, 9)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="HF directory, .gguf file or packaged:smollm2")
    parser.add_argument("--prompts", help="file with one prompt per line")
    parser.add_argument("--tol", type=float, default=1e-3, help="max abs logit difference allowed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    from memjax.checkpoints import load_model
    from memjax.models import decoder

    try:
        model = load_model(args.checkpoint, with_tokenizer=False)
        try:
            from memjax.checkpoints.tokenizer import load_tokenizer

            model.tokenizer = load_tokenizer(model.path)
        except (FileNotFoundError, ValueError, OSError):
            model.tokenizer = None  # random token ids instead
    except (FileNotFoundError, ValueError) as e:
        print(f"check_logits: {e}", file=sys.stderr)
        return 2
    prompts = DEFAULT_PROMPTS
    if args.prompts:
        prompts = [line for line in Path(args.prompts).read_text().splitlines() if line.strip()]
    reference = load_transformers(model.path)

    max_diff, kls, agree, total = 0.0, [], 0, 0
    for ids in prompt_batches(model, prompts, args.seed):
        tokens = np.asarray([ids], np.int32)
        ours, _ = decoder.jit_forward(
            model.params, jnp.asarray(tokens), jnp.arange(len(ids))[None], model.cfg
        )
        ours = np.asarray(ours[0], np.float64)
        with torch.no_grad():
            ref = reference(torch.tensor(tokens, dtype=torch.long)).logits[0].double().numpy()
        max_diff = max(max_diff, float(np.abs(ours - ref).max()))
        lp_ref, lp_ours = _log_softmax(ref), _log_softmax(ours)
        kls.extend((np.exp(lp_ref) * (lp_ref - lp_ours)).sum(-1).tolist())
        agree += int((ours.argmax(-1) == ref.argmax(-1)).sum())
        total += len(ids)
        print(f"{len(ids):5d} tokens  max|diff| {np.abs(ours - ref).max():.3e}")
    result = {
        "max_abs_diff": max_diff,
        "kl": float(np.mean(kls)),
        "top1_agreement": agree / total,
    }
    print(
        f"max abs diff {max_diff:.3e}, mean KL {result['kl']:.3e}, top-1 {result['top1_agreement']:.4f}"
    )
    print(json.dumps(result))
    return 0 if max_diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
