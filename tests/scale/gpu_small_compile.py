"""Compile a small GRPO job for 8 H100s with no GPU (run in the GPU environment; prints JSON).

    .venv-gpu/bin/python -m tests.scale.gpu_small_compile [cudnn|xla]

A 4-layer Qwen2-shaped decoder (XLA's attention, when asked for, in one piece: no query blocks) on the Qwen2.5-3B GRPO recipe's shape of job, 1,024-token rows,
over an fsdp mesh of 8 H100s described by memjax (memjax/aot/gpu_targets.py): the policy train
step and the sampler's prefill, analysed as tools/aot_check.py analyses them. The caller sets
JAX_PLATFORMS=cpu and JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1.
"""

import dataclasses
import json
import runpy
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SEQ_LEN = 1024


def small_job(attention: str):
    from memjax import hardware
    from memjax.aot import programs
    from memjax.models.config import DecoderConfig

    cfg = DecoderConfig(
        "qwen2", vocab_size=8192, embed_dim=384, mlp_dim=1536, num_layers=4, num_heads=6,
        num_kv_heads=2, head_dim=64, qkv_bias=True, tie_embeddings=True, param_dtype="float32",
        compute_dtype="bfloat16", remat="full", attention=attention, attention_query_block=0,
    )  # fmt: skip
    config = runpy.run_path(str(REPO / "configs" / "grpo_qwen3b.py"))["get_config"]()
    job = programs.JobShape.from_config(config)
    w = dataclasses.replace(
        job.workload,
        cfg=cfg,
        hardware=hardware.Hardware(hardware.accelerator("H100-80GB"), 8),
        mesh={"data": 1, "fsdp": 8, "tensor": 1},
        seq_len=SEQ_LEN,
        micro_batch_per_device=2,
        decode_batch=16,
        logprob_rows=0,
        prompt_len=SEQ_LEN // 2,
        group_size=1,
        vocab_chunk=1024,
    )
    return dataclasses.replace(
        job, workload=w, rows=64, step_rows=64, group_size=1, prompt_len=SEQ_LEN // 2
    )


def main(attention: str) -> dict:
    from memjax import planning
    from memjax.aot import analysis, programs, targets
    from memjax.parallel import make_mesh

    target = targets.gpu_target("h100x8")
    job = small_job(attention)
    w = job.workload
    mesh = make_mesh(w.mesh, list(target.devices))
    count = lambda a: planning.shard_factor(a.shape, a.logical_axes, w.train_rules, w.mesh)
    reports = {}
    for program in programs.job_programs(job, mesh, {"policy_train_step", "sampler_prefill"}):
        t0 = time.perf_counter()
        compiled = program.lower().compile()
        reports[program.name] = analysis.analyse(
            program, compiled, target, time.perf_counter() - t0, count
        )
    return {"platform": target.platform, "devices": len(target.devices), "programs": reports}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "cudnn"), default=str))
