"""memjax on one NVIDIA GPU: parity, a few GRPO steps, sampler and train-step speed.

    python tools/gpu_check.py                     # about 8 minutes on an H100; one JSON line
    python tools/gpu_check.py --quick             # smaller shapes, a smoke run
    python tools/gpu_check.py --out gpu.json      # the JSON also written to a file

  parity    SmolLM2-135M-Instruct (the packaged GGUF) on the GPU in f32 (matmuls at full
            precision) against transformers' logits on the CPU: max |diff|, KL, top-1 agreement
  grpo      a few steps of the toy GRPO recipe (configs/toy_grpo.py) on the GPU, run by the
            trainer itself: seconds, and its summary line's reward
  sampler   on a Qwen2.5-1.5B-shaped decoder with random bf16 weights (no checkpoint needed):
            prefill of 128-token prompts and 256 decode steps at batch 1, 8 and 64: tokens/s
            and the fraction of the GPU's HBM bandwidth they use (every step reads the weights
            and the live KV cache once), prefill seconds
  train     the GRPO policy train step (f32 master weights, bf16 compute, remat full) on
            8 rows x 2,048 tokens in 2 micro-batches: seconds per step and MFU on the GPU's
            published bf16 peak (memjax.hardware)
Sampler and train run for attention "xla" and "cudnn" (the prefill and the train step run the
chosen kernel; decode keeps its own cached path, so its two rates should agree). Each timing
is the median of 3 runs after a compile run. Without an NVIDIA GPU it exits with status 2 and
one line saying so; a part that fails is recorded in the JSON as {"error": ...} and the others
still run (exit status 1).
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Qwen2.5-1.5B-Instruct's config.json shape fields.
QWEN25_1P5B = dict(
    model_type="qwen2", vocab_size=151936, embed_dim=1536, mlp_dim=8960, num_layers=28,
    num_heads=12, num_kv_heads=2, head_dim=128, rms_norm_eps=1e-6, rope_theta=1000000.0,
    qkv_bias=True, tie_embeddings=True, max_position_embeddings=32768,
)  # fmt: skip
GPU_NAMES = {
    "H200": "H200",
    "H100": "H100-80GB",
    "A100-SXM4-40GB": "A100-40GB",
    "A100": "A100-80GB",
}


def accelerator_for(device_kind: str):
    """memjax.hardware's entry for a CUDA device kind ('NVIDIA H100 80GB HBM3'), or None."""
    from memjax import hardware

    for key, name in GPU_NAMES.items():
        if key in device_kind:
            return hardware.accelerator(name)
    return None


def _median_time(fn, runs: int = 3) -> float:
    fn()  # compile
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def sampler_check(cfg, params, batch: int, prompt: int, steps: int, acc) -> dict:
    import jax
    import jax.numpy as jnp

    from memjax.sampling import loop
    from memjax.sampling.sampling_params import SamplingParams

    tokens = jax.random.randint(jax.random.key(1), (batch, prompt), 0, cfg.vocab_size)
    mask = jnp.ones((batch, prompt), bool)
    positions = jnp.broadcast_to(jnp.arange(prompt), (batch, prompt))
    size = -(-(prompt + steps) // 128) * 128
    sampling = SamplingParams(temperature=1.0, max_new_tokens=steps)
    no_stop = (jnp.asarray([-1], jnp.int32), jnp.zeros((0, 1), jnp.int32))

    def prefill():
        out = loop.prefill_new(
            params, tokens, mask, positions, cfg=cfg, cache_size=size, per_layer=False
        )
        return jax.block_until_ready(out)

    def decode():
        logits, cache = prefill()
        t0 = time.perf_counter()
        result = loop.decode(
            params, cache, logits, positions[:, -1] + 1, jax.random.key(2), *no_stop,
            cfg=cfg, sampling=sampling,
        )  # fmt: skip
        jax.block_until_ready(result.tokens)
        return time.perf_counter() - t0

    prefill_s = _median_time(prefill)
    decode()  # compile
    decode_s = statistics.median(decode() for _ in range(3))
    weights = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params))
    kv_per_token = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 2  # k and v, bf16
    mean_context = prompt + steps / 2
    bytes_per_step = weights + batch * mean_context * kv_per_token
    limit = acc.hbm_gbps * 1e9 / bytes_per_step if acc else None
    rate = steps / decode_s
    return {
        "batch": batch,
        "prefill_s": round(prefill_s, 4),
        "decode_steps_per_s": round(rate, 1),
        "tokens_per_s": round(rate * batch, 1),
        "hbm_limit_steps_per_s": round(limit, 1) if limit else None,
        "hbm_fraction": round(rate / limit, 3) if limit else None,
    }


def train_check(cfg, rows: int, length: int, micro: int, acc) -> dict:
    import jax
    import jax.numpy as jnp

    from memjax.aot.programs import forward_flops
    from memjax.models.decoder import decoder_abstract
    from memjax.models.params import init_params
    from memjax.rl import losses, steps
    from memjax.training import train_step
    from memjax.training.optimizer import OptimizerConfig, make_optimizer

    train_cfg = cfg.replace(param_dtype="float32", remat="full")
    params = init_params(decoder_abstract(train_cfg), jax.random.key(0))
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-6, total_steps=100))
    step = steps.policy_train_step(
        train_cfg, losses.PolicyLossConfig(), opt, num_micro_batches=micro, donate=True
    )
    key = jax.random.key(3)
    batch = {
        "tokens": jax.random.randint(key, (rows, length), 0, cfg.vocab_size),
        "token_mask": jnp.ones((rows, length), bool),
        "loss_mask": jnp.ones((rows, length), bool),
        "advantages": jax.random.normal(key, (rows, length)),
        "old_logp": jnp.full((rows, length), -2.0),
    }
    holder = {"state": train_step.init_train_state(params, opt)}

    def run():
        holder["state"], metrics = step(holder["state"], batch)
        jax.block_until_ready(metrics)

    seconds = _median_time(run)
    model = 3 * forward_flops(train_cfg, rows, length, length / 2)
    mfu = model / (seconds * acc.peak_tflops * 1e12) if acc else None
    return {
        "step_s": round(seconds, 3),
        "model_flops": model,
        "mfu": round(mfu, 3) if mfu else None,
    }


def parity_check(prompt_ids: int = 48) -> dict:
    """The packaged SmolLM2-135M on the GPU (f32, full-precision matmuls) against transformers
    on the CPU, over a chat prompt and a run of random token ids."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    from memjax.checkpoints import load_model
    from memjax.models import decoder

    check_logits = runpy.run_path(str(REPO / "tools" / "check_logits.py"))
    model = load_model("packaged:smollm2")
    reference = check_logits["load_transformers"](model.path)
    rng = np.random.default_rng(0)
    batches = [
        model.tokenizer.chat([{"role": "user", "content": "What is the capital of France?"}])
    ]
    batches.append(rng.integers(0, model.cfg.vocab_size, prompt_ids).tolist())
    params = jax.device_put(model.params, jax.devices()[0])  # the GPU, when run by main()
    worst, kls, agree, total = 0.0, [], 0, 0
    log_softmax = check_logits["_log_softmax"]
    for ids in batches:
        tokens = np.asarray([ids], np.int32)
        with jax.default_matmul_precision("highest"):
            ours, _ = decoder.jit_forward(
                params, jnp.asarray(tokens), jnp.arange(len(ids))[None], model.cfg
            )
        ours = np.asarray(ours[0], np.float64)
        with torch.no_grad():
            ref = reference(torch.tensor(tokens, dtype=torch.long)).logits[0].double().numpy()
        worst = max(worst, float(np.abs(ours - ref).max()))
        lp_ref, lp_ours = log_softmax(ref), log_softmax(ours)
        kls.extend((np.exp(lp_ref) * (lp_ref - lp_ours)).sum(-1).tolist())
        agree += int((ours.argmax(-1) == ref.argmax(-1)).sum())
        total += len(ids)
    return {
        "model": "SmolLM2-135M-Instruct (packaged GGUF)",
        "device": jax.devices()[0].device_kind,
        "max_abs_diff": worst,
        "mean_kl": float(np.mean(kls)),
        "top1_agreement": agree / total,
        "tokens": total,
    }


def grpo_check(steps: int) -> dict:
    """`steps` GRPO steps of configs/toy_grpo.py by the trainer, on the GPU."""
    import contextlib
    import io
    import tempfile

    from memjax.rl import toy

    config = runpy.run_path(str(REPO / "configs" / "toy_grpo.py"))["get_config"]()
    config.num_steps = steps
    config.eval_every = steps
    out = io.StringIO()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir, contextlib.redirect_stdout(out):
        toy.train_job(config, workdir)
    seconds = time.perf_counter() - t0
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    return {"steps": steps, "seconds_with_compiles": round(seconds, 1), "summary": summary}


def _guarded(fn, *args) -> dict | list:
    """A part's result, or {"error": ...} when it raises (the other parts still run)."""
    try:
        return fn(*args)
    except Exception as e:  # a failing part is the check's finding, recorded in the JSON
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 layers, short sequences (smoke run)")
    p.add_argument("--out", default="", help="also write the JSON to this file")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    import jax

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        backend = jax.default_backend()
        print(
            f"gpu_check: no NVIDIA GPU visible to JAX (default backend: {backend}); run it on a "
            "machine with one and jax[cuda12] installed (pip install -e '.[cuda]')",
            file=sys.stderr,
        )
        return 2
    from memjax.models.config import DecoderConfig
    from memjax.models.decoder import decoder_abstract
    from memjax.models.params import init_params

    device = gpus[0]
    acc = accelerator_for(device.device_kind)
    shape = dict(QWEN25_1P5B, num_layers=2) if args.quick else QWEN25_1P5B
    base = DecoderConfig(**shape, param_dtype="bfloat16", compute_dtype="bfloat16")
    prompt, steps, length = (32, 16, 256) if args.quick else (128, 256, 2048)
    out = {"device": device.device_kind, "accelerator": acc.name if acc else None}
    out["jax"] = jax.__version__
    out["parity"] = _guarded(parity_check)
    out["grpo"] = _guarded(grpo_check, 3 if args.quick else 5)
    out["sampler"] = {}
    params = init_params(decoder_abstract(base), jax.random.key(0))
    for attention in ("xla", "cudnn"):
        cfg = base.replace(attention=attention)
        out["sampler"][attention] = [
            _guarded(sampler_check, cfg, params, b, prompt, steps, acc) for b in (1, 8, 64)
        ]
    del params
    out["train"] = {
        attention: _guarded(train_check, base.replace(attention=attention), 8, length, 2, acc)
        for attention in ("xla", "cudnn")
    }
    line = json.dumps(out)
    if args.out:
        Path(args.out).write_text(line + "\n")
    print(line)
    return 1 if '"error"' in line else 0


if __name__ == "__main__":
    sys.exit(main())
