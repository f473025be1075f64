"""Time of one RL step from its FLOPs and bytes on the hardware's published peaks.

    est = step_roofline(workload, fields, contexts=1)
    est.step_s, est.phases        # {"rollout: prefill": s, "rollout: decode": s, ...}

Each phase takes max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) summed over the mesh's devices:
a lower bound that assumes perfect overlap and no communication, so a real step is slower by
its model-FLOPs utilisation. Every training row is counted at its full length (prompt +
response tokens); shorter rows only make it faster.

  rollout: prefill   every token the model does not write (prompts, tool output) once per wave
                     of `decode_batch` rows: 2 FLOPs per weight per token plus causal attention
                     (`aot.programs.forward_flops`)
  rollout: decode    one step per token the model writes per wave: the sampler's weights and
                     the KV cache read from HBM (memory-bound), or its FLOPs when larger
  log-probs          forward passes over the step's rows: the old policy's, the reference's
                     (KL on), the critic's values (PPO)
  train              forward + backward (3 forwards) + the forward remat recomputes, for the
                     policy and (PPO) the critic, per epoch; and the optimizer reading and
                     writing the trained weights, both AdamW moments and the gradients
"""

from __future__ import annotations

import dataclasses

from memjax.aot.programs import forward_flops
from memjax.planning import JobFields, MemoryPlan, Workload

# Extra forward passes per training forward that the remat policy recomputes.
REMAT_FORWARDS = {"full": 1.0, "dots": 0.5, "none": 0.0}


@dataclasses.dataclass(frozen=True)
class StepEstimate:
    phases: dict[str, float]  # seconds per step
    rows: int  # training rows per step
    tokens: int  # training tokens per step (rows at full length)

    @property
    def step_s(self) -> float:
        return sum(self.phases.values())


def _seconds(flops: float, bytes_: float, w: Workload) -> float:
    acc, n = w.hardware.accelerator, w.hardware.num_devices
    compute = flops / (acc.peak_tflops * 1e12 * n) if acc.peak_tflops else 0.0
    memory = bytes_ / (acc.hbm_gbps * 1e9 * n) if acc.hbm_gbps else 0.0
    return max(compute, memory)


def step_roofline(plan: MemoryPlan, f: JobFields, contexts: int = 1) -> StepEstimate:
    """`contexts`: training rows per trajectory (MemSearcher rebuilds its context each turn)."""
    w, cfg, n = plan.workload, plan.workload.cfg, plan.workload.hardware.num_devices
    R, T = f.decoded_len, w.seq_len
    P = T - R  # prefilled: the prompt and any tool output between the model's calls
    rows = f.prompts_per_step * f.group_size * contexts
    waves = -(-rows // max(1, w.decode_batch))
    sequences = min(rows, w.decode_batch)  # rows in one wave
    phases = {}
    phases["rollout: prefill"] = waves * _seconds(forward_flops(cfg, sequences, P, P / 2), 0, w)
    # One decode step: every device reads its sampler weights and its KV cache.
    step_bytes = (plan.parts["sampler weights"] + plan.parts["KV cache"]) * n
    step_flops = forward_flops(cfg, sequences, 1, P + R / 2)
    phases["rollout: decode"] = waves * R * _seconds(step_flops, step_bytes, w)
    forward = forward_flops(cfg, rows, T, T / 2)
    passes = 1 + int(w.reference) + int(w.critic)  # old policy, reference, critic values
    phases["log-probs"] = _seconds(passes * forward, 0, w)
    per_model = (3 + REMAT_FORWARDS.get(cfg.remat, 0.0)) * forward
    train_flops = f.epochs * per_model * (2 if w.critic else 1)
    trained = plan.parts.get("LoRA adapters", plan.parts["policy weights"])
    updates = f.epochs * max(1, rows // max(1, f.mini_batch_rows))
    # Each update reads and writes weights and both moments and reads the gradients.
    update_bytes = updates * 7 * (trained + plan.parts.get("critic weights + AdamW", 0) / 3) * n
    phases["train"] = _seconds(train_flops, 0, w) + _seconds(0, update_bytes, w)
    return StepEstimate(phases=phases, rows=rows, tokens=rows * T)


__all__ = ["REMAT_FORWARDS", "StepEstimate", "step_roofline"]
