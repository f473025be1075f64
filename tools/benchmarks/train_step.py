"""One GRPO update on the packaged SmolLM2-135M: memjax vs. an equivalent PyTorch step.

    python tools/bench.py train_step [--batch 8] [--seq 512] [--pairs 5]

Both sides do the same work on the same shapes in f32: a forward pass over [B, T] tokens, per-token
log-probs of the tokens, the clipped GRPO surrogate (token-mean), backward, clip-by-global-norm and
AdamW. memjax uses its real train step (`memjax.training.steps.policy_train_step`, chunked
log-probs); PyTorch uses `transformers`' LlamaForCausalLM built from the same config. The CPU's
matmul peak is measured in the same run (the best of JAX and PyTorch on a large f32 GEMM), and the
achieved FLOP/s uses the model FLOPs (6 x matmul params x tokens + attention).

After one warm-up step each, the two steps alternate (memjax, PyTorch, memjax, PyTorch, ...) and
the ratio is the median of the per-pair ratios (tools/benchmarks/pairs.py), with its min/max and quartiles
and the load average before and after, so a job that shares the machine for part of the run
cannot flip it. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from tools.benchmarks.pairs import alternate, format_summary, load_average


def model_flops(cfg, batch: int, seq: int) -> float:
    """Forward + backward FLOPs of the decoder + unembedding (6 N tokens + attention)."""
    D, F, L, V = cfg.embed_dim, cfg.mlp_dim, cfg.num_layers, cfg.vocab_size
    qkvo = D * cfg.head_dim * (2 * cfg.num_heads + 2 * cfg.num_kv_heads)
    per_layer = qkvo + 3 * D * F
    matmul_params = L * per_layer + D * V
    tokens = batch * seq
    attn = L * 2 * 2 * batch * seq * seq * cfg.num_heads * cfg.head_dim  # QK^T and PV (full)
    return 6.0 * matmul_params * tokens + 3.0 * attn


def matmul_peak(n: int = 2048, reps: int = 5) -> float:
    """Best f32 GEMM FLOP/s of JAX and of PyTorch on this machine, now."""
    import torch

    a = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    f(a, a).block_until_ready()
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        f(a, a).block_until_ready()
        best = max(best, 2 * n**3 / (time.perf_counter() - t))
    ta = torch.ones(n, n)
    torch.mm(ta, ta)
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(ta, ta)
        best = max(best, 2 * n**3 / (time.perf_counter() - t))
    return best


def memjax_step(model, batch_np, chunk: int, remat: str):
    """memjax's real policy train step, compiled and warmed up; returns a one-step closure."""
    from memjax.rl import losses, steps
    from memjax.training import train_step
    from memjax.training.optimizer import OptimizerConfig, make_optimizer

    cfg = model.cfg.replace(remat=remat)
    opt = make_optimizer(OptimizerConfig(learning_rate=1e-6, max_grad_norm=1.0))
    step = steps.policy_train_step(
        cfg, losses.PolicyLossConfig(), opt, vocab_chunk=chunk, donate=True
    )
    holder = {"state": train_step.init_train_state(model.params, opt)}

    def one():
        holder["state"], m = step(holder["state"], batch_np)
        jax.block_until_ready((holder["state"].params, m))

    one()  # compile + warm-up
    return one


def torch_step(cfg, batch_np):
    """The same update in PyTorch (transformers' Llama), warmed up; returns a one-step closure."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    hf = LlamaConfig(**{k: v for k, v in cfg.to_hf_dict().items() if k != "architectures"})
    model = LlamaForCausalLM(hf).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)
    tokens = torch.from_numpy(batch_np["tokens"]).long()
    mask = torch.from_numpy(batch_np["loss_mask"]).float()[:, 1:]
    adv = torch.from_numpy(batch_np["advantages"])[:, 1:]
    old = torch.from_numpy(batch_np["old_logp"])[:, 1:]

    def one():
        logits = model(input_ids=tokens).logits[:, :-1].float()  # [B, T-1, V]
        logp = torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:, None])[..., 0]
        ratio = torch.exp(logp - old)
        pg = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2))
        loss = (pg * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    one()  # warm-up
    return one


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--pairs", type=int, default=5, help="memjax/PyTorch step pairs timed")
    parser.add_argument(
        "--chunk", type=int, default=16384, help="vocabulary chunk of the log-probs"
    )
    parser.add_argument("--remat", default="none", choices=["none", "full", "dots"])


def main(args: argparse.Namespace) -> dict:

    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    from memjax.checkpoints import load_model

    model = load_model("packaged:smollm2", with_tokenizer=False, param_dtype="float32")
    cfg = model.cfg
    rng = np.random.default_rng(0)
    B, T = args.batch, args.seq
    tokens = rng.integers(0, cfg.vocab_size, (B, T)).astype(np.int32)
    loss_mask = np.zeros((B, T), bool)
    loss_mask[:, T // 4 :] = True  # a quarter prompt, the rest completion
    batch = {
        "tokens": tokens,
        "token_mask": np.ones((B, T), bool),
        "loss_mask": loss_mask,
        "advantages": (rng.normal(size=(B, 1)) * loss_mask).astype(np.float32),
        "old_logp": np.full((B, T), -10.9, np.float32),
    }
    print(f"SmolLM2: {cfg.num_layers} layers, D={cfg.embed_dim}, V={cfg.vocab_size}; batch {B}x{T}")
    load_before = load_average()
    peak = matmul_peak()
    print(f"matmul peak (f32 GEMM, best of JAX and PyTorch): {peak / 1e9:.1f} GFLOP/s")
    run_mj = memjax_step(model, batch, args.chunk, args.remat)
    del model  # the train state holds the parameters now
    run_pt = torch_step(cfg, batch)
    times = alternate(run_mj, run_pt, args.pairs)
    load_after = load_average()
    paired = times.summary()
    t_mj, t_pt = paired["memjax_median_s"], paired["peer_median_s"]
    flops = model_flops(cfg, B, T)
    mj_tok, pt_tok = B * T / t_mj, B * T / t_pt
    print(f"memjax : {t_mj:.2f} s/step  {mj_tok:.0f} tok/s  {flops / t_mj / 1e9:.1f} GFLOP/s")
    print(f"pytorch: {t_pt:.2f} s/step  {pt_tok:.0f} tok/s  {flops / t_pt / 1e9:.1f} GFLOP/s")
    print(f"{format_summary(paired)}; load average {load_before} -> {load_after}")
    out = {
        **paired,
        "memjax_tok_s": round(mj_tok, 1),
        "torch_tok_s": round(pt_tok, 1),
        "peak_fraction": round(flops / t_mj / peak, 3),
        "memjax_step_s": [round(x, 3) for x in times.a_s],
        "torch_step_s": [round(x, 3) for x in times.b_s],
        "peak_gflops": round(peak / 1e9, 1),
        "model_gflop_per_step": round(flops / 1e9, 1),
        "batch": B,
        "seq": T,
        "load_before": load_before,
        "load_after": load_after,
    }
    return out
