"""LoRA against full fine-tuning on the packaged SmolLM2-135M: one GRPO update each, and decode.

    .venv/bin/python tools/bench_lora_step.py [--batch 4] [--seq 256] [--pairs 3] [--rank 16]
    .venv/bin/python tools/bench_lora_step.py --decode [--decode_rows 4] [--new_tokens 32]

Train: the real train step (`policy_train_step`, f32, AdamW, chunked log-probs) on the same
[B, T] batch, full fine-tuning and LoRA (adapters on all seven projections, the base frozen and
passed beside the state) run alternately, one step each per pair; the result is the median of
the per-pair time ratios LoRA / full. Memory is each compiled step's own accounting
(`memory_analysis()`: its arguments, which hold the train state, the frozen base and the batch,
plus its temporaries), so it shows what the LoRA state leaves out (AdamW moments and gradients of
the base) without depending on the allocator.

Decode (`--decode`): the sampler on the base with adapters merged into its copy against the
sampler applying them on the fly (the adapter tree beside the weights), alternating, median
ratio on-the-fly / merged. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def _batch(cfg, B: int, T: int) -> dict:
    rng = np.random.default_rng(0)
    loss_mask = np.zeros((B, T), bool)
    loss_mask[:, T // 4 :] = True  # a quarter prompt, the rest completion
    return {
        "tokens": jnp.asarray(rng.integers(0, cfg.vocab_size, (B, T)).astype(np.int32)),
        "token_mask": jnp.ones((B, T), bool),
        "loss_mask": jnp.asarray(loss_mask),
        "advantages": jnp.asarray((rng.normal(size=(B, 1)) * loss_mask).astype(np.float32)),
        "old_logp": jnp.full((B, T), -10.9, jnp.float32),
    }


def _memory(step, state, batch, frozen) -> dict[str, float]:
    """MiB of the compiled step: its arguments (state, frozen base, batch) and temporaries."""
    lowered = step.jitted(batch).lower(state, batch, frozen)
    m = lowered.compile().memory_analysis()
    mib = lambda b: round(b / 2**20, 1)
    return {
        "arguments_mib": mib(m.argument_size_in_bytes),
        "temporaries_mib": mib(m.temp_size_in_bytes),
        "total_mib": mib(m.argument_size_in_bytes + m.temp_size_in_bytes),
    }


def bench_train(model, args) -> dict:
    from memjax.models.lora_config import LoraConfig
    from memjax.rl import losses, steps
    from memjax.training import lora_state, train_step
    from memjax.training.optimizer import OptimizerConfig, make_optimizer

    cfg = model.cfg.replace(lora=LoraConfig(rank=args.rank, alpha=2.0 * args.rank))
    batch = _batch(cfg, args.batch, args.seq)
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-5, max_grad_norm=1.0))
    kw = dict(vocab_chunk=args.chunk, donate=True)
    full_step = steps.policy_train_step(cfg, losses.PolicyLossConfig(), opt, **kw)
    lora_step = steps.policy_train_step(
        cfg, losses.PolicyLossConfig(), opt, **kw, **lora_state.policy_step_kwargs(cfg)
    )
    base = model.params
    full = train_step.init_train_state(jax.tree.map(jnp.copy, base), opt)
    lora = train_step.init_train_state(lora_state.init_policy_adapters(cfg, jax.random.key(0)), opt)
    memory = {
        "full": _memory(full_step, full, batch, None),
        "lora": _memory(lora_step, lora, batch, base),
    }

    def run_full(state):
        state, m = full_step(state, batch)
        jax.block_until_ready((state.params, m))
        return state

    def run_lora(state):
        state, m = lora_step(state, batch, base)
        jax.block_until_ready((state.params, m))
        return state

    full, lora = run_full(full), run_lora(lora)  # compile and warm up
    pairs = []
    for _ in range(args.pairs):
        t = time.perf_counter()
        full = run_full(full)
        t_full = time.perf_counter() - t
        t = time.perf_counter()
        lora = run_lora(lora)
        pairs.append((t_full, time.perf_counter() - t))
        print(f"  full {pairs[-1][0]:.2f} s  lora {pairs[-1][1]:.2f} s", flush=True)
    return {
        "lora_over_full_step_time": round(statistics.median(b / a for a, b in pairs), 3),
        "full_step_s": round(statistics.median(a for a, _ in pairs), 3),
        "lora_step_s": round(statistics.median(b for _, b in pairs), 3),
        "trainable_params_full": sum(x.size for x in jax.tree.leaves(full.params)),
        "trainable_params_lora": sum(x.size for x in jax.tree.leaves(lora.params)),
        "memory": memory,
    }


def bench_decode(model, args) -> dict:
    from memjax.models import lora
    from memjax.models.lora_config import LoraConfig
    from memjax.models.params import init_params
    from memjax.sampling.sampler import prepare_params, sample
    from memjax.sampling.sampling_params import SamplingParams

    cfg = model.cfg.replace(lora=LoraConfig(rank=args.rank, alpha=2.0 * args.rank))
    adapters = init_params(lora.lora_abstract(cfg), jax.random.key(0))
    merged = prepare_params(lora.merge_adapters(model.params, adapters, cfg), cfg)
    on_the_fly = prepare_params(lora.with_adapters(model.params, adapters), cfg)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, cfg.vocab_size, 24).tolist() for _ in range(args.decode_rows)]
    sp = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens)

    def run(params):
        t = time.perf_counter()
        out = sample(params, cfg, prompts, sp, 0, eos_ids=(-1,))
        jax.block_until_ready(out.tokens)
        return time.perf_counter() - t

    run(merged), run(on_the_fly)  # compile and warm up
    pairs = [(run(merged), run(on_the_fly)) for _ in range(args.pairs)]
    for a, b in pairs:
        print(f"  merged {a:.2f} s  on the fly {b:.2f} s", flush=True)
    return {
        "on_the_fly_over_merged_decode_time": round(statistics.median(b / a for a, b in pairs), 3),
        "merged_decode_s": round(statistics.median(a for a, _ in pairs), 3),
        "on_the_fly_decode_s": round(statistics.median(b for _, b in pairs), 3),
        "decode_rows": args.decode_rows,
        "new_tokens": args.new_tokens,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--pairs", type=int, default=3, help="alternating (full, LoRA) step pairs")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--chunk", type=int, default=16384, help="vocabulary chunk of the log-probs")
    p.add_argument("--decode", action="store_true", help="merged vs on-the-fly decoding instead")
    p.add_argument("--decode_rows", type=int, default=4)
    p.add_argument("--new_tokens", type=int, default=32)
    args = p.parse_args()

    from memjax.checkpoints import load_model

    model = load_model("packaged:smollm2", with_tokenizer=False, param_dtype="float32")
    cfg = model.cfg
    print(
        f"SmolLM2: {cfg.num_layers} layers, D={cfg.embed_dim}, V={cfg.vocab_size}; rank {args.rank}"
    )
    if args.decode:
        out = bench_decode(model, args)
    else:
        print(f"GRPO step, batch {args.batch}x{args.seq}, f32, AdamW")
        out = bench_train(model, args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
