"""Sampler and train-step speed on one NVIDIA GPU, for each attention implementation.

    python tools/gpu_check.py                 # about 5 minutes on an H100; one JSON line
    python tools/gpu_check.py --quick         # smaller shapes, a smoke run

On a Qwen2.5-1.5B-shaped decoder with random bf16 weights (no checkpoint needed):
  sampler   prefill of 128-token prompts and 256 decode steps at batch 1 and 64: decode steps/s
            against the HBM-bandwidth limit (every step reads the weights and the live KV
            cache once), prefill seconds per implementation
  train     the GRPO policy train step (f32 master weights, bf16 compute, remat full) on
            8 rows x 2,048 tokens in 2 micro-batches: seconds per step and MFU on the GPU's
            published bf16 peak (memjax.hardware)
for attention "xla" and "cudnn" (the prefill runs the chosen kernel; decode keeps its own cached
path, so its two rates should agree). Each timing is the median of 3 runs after a compile run. Without an NVIDIA GPU it exits with status
2 and one line saying so.
"""

from __future__ import annotations

import argparse
import json
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
        "hbm_limit_steps_per_s": round(limit, 1) if limit else None,
        "fraction_of_limit": round(rate / limit, 3) if limit else None,
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 layers, short sequences (smoke run)")
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
    out = {"device": device.device_kind, "accelerator": acc.name if acc else None, "sampler": {}}
    params = init_params(decoder_abstract(base), jax.random.key(0))
    for attention in ("xla", "cudnn"):
        cfg = base.replace(attention=attention)
        out["sampler"][attention] = [
            sampler_check(cfg, params, b, prompt, steps, acc) for b in (1, 64)
        ]
    del params
    out["train"] = {
        attention: train_check(base.replace(attention=attention), 8, length, 2, acc)
        for attention in ("xla", "cudnn")
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
