"""Compile a config's jitted functions for its real target, without the hardware.

    python tools/aot_check.py configs/grpo_qwen3b.py --topology v5p:2x2x1     # needs libtpu
    .venv-gpu/bin/python tools/aot_check.py configs/grpo_qwen3b.py --target h100x4   # jax[cuda12]
    python tools/aot_check.py configs/ppo_qwen7b.py                          # default slice
    python tools/aot_check.py configs/toy_grpo_scale.py --cpu-devices 8       # no libtpu
    python tools/aot_check.py CONFIG --only policy_train_step --mesh 1,2,2 --attention xla
    python tools/aot_check.py configs/ppo_qwen7b.py --only policy_train_step --donate yes

Builds the job's abstract train state, batch and sampler cache over a mesh of the target's
devices (no weights, no allocation), lowers and compiles the functions the job runs (policy
train step with its micro-batch scan and remat, PPO's critic step, the old / reference log-prob pass, the
sampler's prefill and decode loop, the continuous-batching engine's slot prefill and decode call;
memjax/aot/programs.py) and prints per function: compiled
argument / output / temporary bytes per device against the memory planner's figure for the
same part, whether it fits the device's usable HBM with what else is resident, the largest
collectives in the compiled HLO, parameters gathered whole, XLA's cost analysis, and the
roofline step time and MFU on the target's published peaks. The last line is one JSON object.

`--donate yes|no` overrides whether the train steps donate their state (by default as the
trainer does on the target: not on TPU, where donating the state its micro-batch loop reads
makes the compiler keep copies of it; docs/scale.md has the figures). Not donating, the planner's figure for the step's outputs + temporaries
(its working set) is compared, since the compiler keeps scratch in the new state's buffers.

A TPU slice (`--topology v5p:2x2x4`, default: the config's TPU, or v5p chips of the config's
device count) compiles with libtpu's TPU compiler, in an environment of its own
(`make setup-tpu`); `--target h100x8` (h100xN, h200xN, a100xN) compiles with XLA's GPU
compiler for N NVIDIA GPUs described by memjax (memjax/aot/gpu_targets.py), with no GPU here,
in the GPU environment (`make setup-gpu`); `--cpu-devices N` compiles for N host devices
(memory against the config's accelerator). On GPUs the roofline's FLOPs are the model's own
(XLA's GPU cost analysis comes back empty), and each program's fused attention kernels
(cuDNN's `__cudnn$fmha*` custom calls) and any [T, T] score buffer in the compiled HLO are
listed; the engine's decode runs JAX's Pallas decode kernels there and on TPU (Triton / Mosaic
custom calls, memjax/models/slot_attention.py). When the slice's device count differs from the config's, the mesh keeps its
tensor axis and fsdp takes the rest. Exit status: 0 every function fits, 1 one does not,
2 the config or target is invalid.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import runpy
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS = (
    "policy_train_step",
    "critic_train_step",
    "logprob_pass",
    "sampler_prefill",
    "sampler_decode",
    "engine_prefill",
    "engine_decode",
    "engine_decode_kernel",  # GPU and TPU targets: the engine's decode with a Pallas kernel
)


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config", help="configs/NAME.py")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--topology", default="", help="a TPU slice, e.g. v5p:2x2x4 or v5e:4x4")
    where.add_argument(
        "--target", default="", help="NVIDIA GPUs: h100x8, h100xN, h200x8, a100x8 (jax[cuda12])"
    )
    where.add_argument("--cpu-devices", type=int, default=0, help="compile for N CPU devices")
    p.add_argument("--only", default="", help=f"comma-separated subset of {','.join(FUNCTIONS)}")
    p.add_argument("--mesh", default="", help="data,fsdp,tensor (one may be -1)")
    p.add_argument("--micro_batch_per_device", type=int, default=0)
    p.add_argument("--decode_batch", type=int, default=0)
    p.add_argument(
        "--prefill_chunk", type=int, default=0, help="the sampler's prefill chunk (tokens)"
    )
    p.add_argument("--remat", choices=("none", "dots", "full"), default="")
    p.add_argument("--attention", choices=("xla", "splash", "cudnn"), default="")
    p.add_argument(
        "--donate",
        choices=("auto", "yes", "no"),
        default="auto",
        help="whether train steps donate their state (auto: as the trainer does on the target)",
    )
    return p.parse_args(argv)


def run(args) -> tuple[int, dict]:
    from memjax import hardware as hw_lib
    from memjax import planning
    from memjax.aot import analysis, programs, targets
    from memjax.models import fused_attention
    from memjax.parallel import make_mesh

    config = runpy.run_path(args.config)["get_config"]()
    problems = planning.validate(config)
    if problems:
        return 2, {"error": f"{args.config}: {problems[0]}"}
    base = planning.workload_from_config(config)
    try:
        if args.cpu_devices:
            target = targets.cpu_target(args.cpu_devices, base.hardware)
        elif args.target:
            target = targets.gpu_target(args.target)
        else:
            target = targets.tpu_target(args.topology or targets.default_topology(base.hardware))
        job = programs.JobShape.from_config(config)
        changes = planning.workload_overrides(
            base,
            hardware=target.hardware,
            mesh=args.mesh,
            micro_batch_per_device=args.micro_batch_per_device,
            decode_batch=args.decode_batch,
            prefill_chunk=args.prefill_chunk,
            remat=args.remat,
            attention=args.attention,
        )
        job = dataclasses.replace(job, workload=dataclasses.replace(base, **changes))
        donate = {"yes": True, "no": False}.get(args.donate)
        job = dataclasses.replace(
            job, workload=dataclasses.replace(job.workload, donate_state=donate)
        )
    except (targets.TargetError, planning.PlanError, hw_lib.HardwareError) as e:
        return 2, {"error": f"{args.config}: {e}"}
    w = job.workload
    mesh = make_mesh(w.mesh, list(target.devices))
    attention = fused_attention.resolve(w.cfg.attention, mesh)
    # The planner counts the implementation the compile runs (on CPU devices: XLA's).
    w = dataclasses.replace(w, cfg=w.cfg.replace(attention=attention))
    job = dataclasses.replace(job, workload=w)
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - set(FUNCTIONS)
    if unknown:
        return 2, {"error": f"--only {sorted(unknown)}: choose from {FUNCTIONS}"}
    plan = planning.plan(w)
    print(
        f"{args.config}: {config.model.preset} {job.algorithm} on {target.name} "
        f"({w.hardware.describe()}), mesh {w.mesh}, attention={attention}, remat={w.cfg.remat}, "
        f"{job.rows} rows x {w.seq_len} tokens in {job.num_micro_batches} micro-batches"
        + f", train steps {'donating' if job.donates else 'not donating'} their state"
    )
    print(
        f"planner: peak {analysis.gib(plan.peak)} GiB of {analysis.gib(plan.usable)} usable "
        f"({'fits' if plan.fits else 'does NOT fit'})"
    )
    shard_count = lambda info: planning.shard_factor(
        info.shape, info.logical_axes, w.train_rules, w.mesh
    )
    reports = []
    for program in programs.job_programs(job, mesh, only):
        t0 = time.perf_counter()
        try:
            compiled = program.lower().compile()
        except Exception as e:  # the TPU compiler refuses programs that exceed HBM
            if "RESOURCE_EXHAUSTED" not in str(e):
                raise
            report = analysis.rejected(program, target, e, time.perf_counter() - t0)
            reports.append(report)
            print(f"{program.name}: does NOT fit: the compiler says {report['compile_error']}")
            continue
        report = analysis.analyse(program, compiled, target, time.perf_counter() - t0, shard_count)
        reports.append(report)
        _print_report(report, analysis)
    print(analysis.TABLE_HEADER)
    for r in reports:
        print(analysis.table_row(r))
    summary = {
        "config": args.config,
        "target": target.name,
        "platform": target.platform,
        "mesh": w.mesh,
        "attention": attention,
        "planner_peak_bytes": plan.peak,
        "planner_fits": plan.fits,
        "fits": all(r["fits"] for r in reports),
        "verdicts": {r["function"]: "fits" if r["fits"] else "does not fit" for r in reports},
        "functions": reports,
    }
    return (0 if summary["fits"] else 1), summary


def _print_report(r: dict, analysis) -> None:
    gib = analysis.gib
    p, gap = r["planner"], r["planner_gap"]
    line = lambda name, key: (
        f"  {name:<12}{gib(r[key]):>8} GiB"
        + (f"   planner {gib(p[name]):>8} GiB ({gap[name]:+.0%})" if name in p else "")
    )
    print(f"{r['function']}  (compiled in {r['compile_s']} s)")
    print(line("arguments", "argument_bytes"))
    print(line("outputs", "output_bytes") + f"   aliased {gib(r['alias_bytes'])} GiB")
    print(line("temporaries", "temp_bytes"))
    if "working set" in p:  # a step not donating: its outputs + temporaries, compared together
        print(
            f"  {'working set':<12}{gib(r['working_set_bytes']):>8} GiB   "
            f"planner {gib(p['working set']):>8} GiB "
            f"({gap['working set']:+.0%})"
        )
    verdict = "fits" if r["fits"] else "does NOT fit"
    print(
        f"  resident   {gib(r['resident_bytes']):>8} GiB of {gib(r['usable_bytes'])} usable: "
        f"{verdict}"
    )
    kinds = ", ".join(
        f"{k} x{v['count']} ({v['bytes'] / 2**20:.0f} MiB)"
        for k, v in r["collectives"]["by_kind"].items()
    )
    print(f"  collectives {kinds or 'none'}")
    for c in r["collectives"]["largest"]:
        print(f"    {c}")
    for flag in r["gathered_whole"]:
        print(f"  gathered whole (rules shard it): {flag}")
    if r["attention_len"]:
        scores = ", ".join(r["score_buffers"]) or "none"
        print(
            f"  attention  fused kernels {analysis.attention_cell({**r, 'score_buffers': []})}; "
            f"[{r['attention_len']}, {r['attention_len']}] score buffers: {scores}"
        )
    for flag in r["replicated_inputs"]:
        print(f"  replicated input (rules shard it): {flag}")
    print(
        f"  XLA cost   {r['xla_flops']:.3g} FLOPs, {r['xla_bytes_accessed']:.3g} bytes "
        "(loop bodies counted once)"
    )
    print(
        f"  roofline   {r['roofline_s']:.3g} s/call ({r['roofline_bound']}-bound), "
        f"model {r['model_flops']:.3g} FLOPs/device, MFU {r['roofline_mfu']:.2f}"
    )


def main(argv=None) -> int:
    args = _parse(argv)
    if args.cpu_devices:
        flag = f"--xla_force_host_platform_device_count={args.cpu_devices}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.target:  # the CUDA plugin's compiler, with no GPU (and no driver) to check
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    sys.path.insert(0, str(REPO))
    code, summary = run(args)
    if "error" in summary:
        print(summary["error"], file=sys.stderr)
    print(json.dumps(summary, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main())
