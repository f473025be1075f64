"""LoRA against full fine-tuning on the packaged SmolLM2-135M: one GRPO update each, and decode.

    python tools/bench.py lora_step [--batch 4] [--seq 256] [--pairs 3] [--rank 16]
    python tools/bench.py lora_step --decode [--decode_rows 4] [--new_tokens 32]

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

import jax
import jax.numpy as jnp
import numpy as np

from tools.benchmarks.pairs import alternate


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

    states = {"full": run_full(full), "lora": run_lora(lora)}  # compile and warm up

    def step(name, run):
        return lambda: states.__setitem__(name, run(states[name]))

    times = alternate(step("full", run_full), step("lora", run_lora), args.pairs)
    for a, b in zip(times.a_s, times.b_s):
        print(f"  full {a:.2f} s  lora {b:.2f} s", flush=True)
    s = times.summary()
    full, lora = states["full"], states["lora"]
    return {
        "lora_over_full_step_time": s["ratio"],
        "full_step_s": s["memjax_median_s"],
        "lora_step_s": s["peer_median_s"],
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
        return lambda: jax.block_until_ready(
            sample(params, cfg, prompts, sp, 0, eos_ids=(-1,)).tokens
        )

    run(merged)(), run(on_the_fly)()  # compile and warm up
    times = alternate(run(merged), run(on_the_fly), args.pairs)
    for a, b in zip(times.a_s, times.b_s):
        print(f"  merged {a:.2f} s  on the fly {b:.2f} s", flush=True)
    s = times.summary()
    return {
        "on_the_fly_over_merged_decode_time": s["ratio"],
        "merged_decode_s": s["memjax_median_s"],
        "on_the_fly_decode_s": s["peer_median_s"],
        "decode_rows": args.decode_rows,
        "new_tokens": args.new_tokens,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--pairs", type=int, default=3, help="alternating (full, LoRA) step pairs")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument(
        "--chunk", type=int, default=16384, help="vocabulary chunk of the log-probs"
    )
    parser.add_argument(
        "--decode", action="store_true", help="merged vs on-the-fly decoding instead"
    )
    parser.add_argument("--decode_rows", type=int, default=4)
    parser.add_argument("--new_tokens", type=int, default=32)


def main(args: argparse.Namespace) -> dict:

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
    return out
