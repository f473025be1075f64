"""Will a recipe fit its hardware? Per-device memory of a config on its mesh, without weights.

    python tools/plan_memory.py configs/grpo_qwen7b.py
    python tools/plan_memory.py configs/grpo_qwen7b.py --mesh=1,4,1 --micro_batch_per_device=1
    python tools/plan_memory.py configs/memsearcher_qwen7b.py --tpu=v5p-16 --mesh=1,-1,1
    python tools/plan_memory.py --all            # every config in configs/ that names hardware
    python tools/plan_memory.py configs/grpo_qwen7b.py --lora_rank=16 --param_dtype=bfloat16
    python tools/plan_memory.py configs/grpo_qwen7b.py --lora_rank=16 --min_devices

For one config it prints the breakdown (weights, AdamW state, reference model, critic,
sampler weights, KV cache, gradients, activations under the remat policy; see
memjax/planning.py for what each part counts), whether the peak fits the hardware, and if not,
the changes that make it fit as command-line overrides. `--lora_rank` plans the same recipe with
LoRA adapters (as `--config.rl.lora.rank` (Memory-R1) or `--config.lora.rank` (MemSearcher)
would run it; `--param_dtype=bfloat16` holds the frozen base in bf16), `--min_devices` the
fewest devices of the config's accelerator on which it fits (fsdp over them, with the config's
tensor axis where it divides the count). Exit status: 0 fits, 1 does not fit, 2 the config is
invalid. `--all` prints one Markdown table row per config (exit 1 if any does not fit the
hardware it names), and for a config sized for more devices than its paper trained on
(`hardware.paper_num_devices`) its best plan on the paper's count.
"""

from __future__ import annotations

import argparse
import dataclasses
import runpy
import sys
from pathlib import Path

from memjax import hardware as hw_lib
from memjax import planning
from memjax.models.lora_config import LORA_TARGETS, LoraConfig

REPO = Path(__file__).resolve().parents[1]


def _load(path: str):
    return runpy.run_path(path)["get_config"]()


def _overrides(args, config) -> dict:
    """Workload fields the command line changes (target, mesh, batch sizes, remat, dtype, LoRA)."""
    w = planning.workload_from_config(config)
    hardware = None
    if args.tpu:
        hardware = hw_lib.parse_tpu_slice(args.tpu)
    elif args.hardware:
        name, _, n = args.hardware.partition(":")
        hardware = hw_lib.Hardware(hw_lib.accelerator(name), int(n or w.hardware.num_devices))
    lora = None
    if args.lora_rank:
        cfg = w.cfg
        targets = args.lora_targets or (cfg.lora.targets if cfg.lora else LORA_TARGETS)
        alpha = cfg.lora.alpha if cfg.lora else 2.0 * args.lora_rank
        lora = LoraConfig(rank=args.lora_rank, alpha=alpha, targets=targets)
    return planning.workload_overrides(
        w,
        hardware=hardware,
        mesh=args.mesh,
        micro_batch_per_device=args.micro_batch_per_device,
        decode_batch=args.decode_batch,
        prefill_chunk=args.prefill_chunk,
        remat=args.remat,
        param_dtype=args.param_dtype,
        lora=lora,
    )


# Parts held to XLA's own numbers (tools/aot_check.py, TPU compiler, Qwen2.5-3B GRPO and PPO on
# v5p:2x2x1 and Qwen2.5-7B GRPO with tensor=2; splash unless noted; the donated step's parts
# with --donate yes), and how close the planner is.
CHECKED_AGAINST_COMPILE = {
    "policy weights + optimizer (AdamW m, v)": "train step arguments, 0%",
    "critic weights + AdamW": "critic step arguments, 0%",
    "reference model": "log-prob pass arguments, 0%",
    "sampler weights + KV cache": "decode arguments, 0%; prefill outputs, 0%",
    "gradients + activations + optimizer update": "train step +6% (3B), -3% (7B f2 t2); before the embedding gradient was kept sharded: -13% (3B v5e:4x4 t=2), critic -11%",
    "new train state + gradients + saved activations (TPU: no donation)": "train step outputs + temporaries, every paper config on its v5p slice: +7% (3B GRPO and PPO), +10% (7B f2 t2), +7% (7B t4), +9% (8B f2 t2), +4% (8B t4), +5% (14B f4 t2), +1% (14B f2 t4); PPO critics +1% to +3%; MemSearcher +1% (3B f8, its vocabulary tables counted apart), +7% (7B), +4% (14B)",
    "activations: one layer (XLA attention)": "train step with f32 scores, -3% (3B)",
    "rollout: prefill, rollout: decode step": "prefill -9%, decode -5%",
    "log-prob pass (a chunk)": "chunks of 4 rows/device +5% (3B; before chunking 1,024 rows: -7%)",
    "gradients + activations + optimizer update (GPU)": "XLA's GPU compiler, cuDNN attention, donated (aot_check --target), every paper config's train step on its H100s: +3% (3B GRPO and PPO), -0% (7B GRPO), +4% (7B PPO), -3% (8B GRPO), +5% (8B PPO), -1% (14B GRPO and PPO); MemSearcher +5% (3B), +1% (7B), +1% (14B); PPO critics -8% to +4%",
}
UNCHECKED = (
    "the sampler and log-prob pass beyond 3B on TPU; on GPU the log-prob pass (+21% 3B, "
    "-38% 7B) and the prefill and decode step's temporaries (-18% to +42%)"
)


def checked_note() -> str:
    lines = ["checked against a compile (planner vs XLA, per device):"]
    lines += [f"  {part:<44} {how}" for part, how in CHECKED_AGAINST_COMPILE.items()]
    return "\n".join(lines + [f"  not checked: {UNCHECKED}"])


def min_devices(workload: planning.Workload, limit: int = 1024) -> planning.MemoryPlan | None:
    """The plan on the fewest devices that fits (fsdp over them, with the config's tensor axis
    where it divides the count, else none), or None up to `limit`."""
    acc = workload.hardware.accelerator
    for n in range(1, limit + 1):
        for t in sorted({workload.mesh["tensor"], 1}, reverse=True):
            if n % t or workload.decode_batch % (n // t):
                continue
            mesh = {"data": 1, "fsdp": n // t, "tensor": t}
            plan = planning.plan(
                dataclasses.replace(workload, hardware=hw_lib.Hardware(acc, n), mesh=mesh)
            )
            if plan.fits:
                return plan
    return None


def _gib(b: int) -> str:
    return f"{b / hw_lib.GIB:.1f}"


HEADER = (
    "| config | hardware | mesh (d,f,t) | weights+AdamW | ref | critic | sampler w | KV cache "
    "| grads+activ | peak | usable | fits | to fit | on the paper's hardware |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def summary_row(
    name: str, plan: planning.MemoryPlan, paper: planning.MemoryPlan | None = None
) -> str:
    p, w = plan.parts, plan.workload
    train_parts = plan.train
    changes = ""
    if not plan.fits:
        steps, after = planning.suggest(w)
        changes = (
            "; ".join(d for d, _ in steps) + (f" -> {_gib(after.peak)}" if after.fits else "")
            if steps
            else "none found"
        )
    mesh = f"{w.mesh['data']},{w.mesh['fsdp']},{w.mesh['tensor']}"
    on_paper = "the same"
    if paper is not None:
        pw = paper.workload
        on_paper = (
            f"{pw.hardware.describe()}: {_gib(paper.peak)} at best "
            f"(mesh {pw.mesh['data']},{pw.mesh['fsdp']},{pw.mesh['tensor']}): "
            + ("fits" if paper.fits else "does not fit")
        )
    return (
        f"| {name} | {w.hardware.describe()} | {mesh} "
        f"| {_gib(p['policy weights'] + p.get('LoRA adapters', 0) + p['optimizer (AdamW m, v)'])} "
        f"| {_gib(p.get('reference model', 0))} | {_gib(p.get('critic weights + AdamW', 0))} "
        f"| {_gib(p['sampler weights'])} | {_gib(p['KV cache'])} | {_gib(train_parts)} "
        f"| {_gib(plan.peak)} | {_gib(plan.usable)} | {'yes' if plan.fits else 'NO'} | {changes} "
        f"| {on_paper} |"
    )


def scale_configs(folder: Path) -> list[Path]:
    """Config files in `folder` that name hardware (the paper-scale ones)."""
    out = []
    for path in sorted(folder.glob("*.py")):
        config = _load(str(path))
        if "hardware" in config:
            out.append(path)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("config", nargs="?", help="configs/NAME.py")
    p.add_argument("--all", action="store_true", help="a summary row for every scale config")
    p.add_argument("--configs", default=str(REPO / "configs"), help="folder for --all")
    p.add_argument("--mesh", default="", help="data,fsdp,tensor (one may be -1)")
    p.add_argument("--hardware", default="", help="ACCELERATOR[:N], e.g. H100-80GB:8")
    p.add_argument("--tpu", default="", help="a TPU slice, e.g. v5p-16")
    p.add_argument("--micro_batch_per_device", type=int, default=0)
    p.add_argument("--decode_batch", type=int, default=0)
    p.add_argument(
        "--prefill_chunk", type=int, default=0, help="the sampler's prefill chunk (tokens)"
    )
    p.add_argument("--remat", choices=("none", "dots", "full"), default="")
    p.add_argument("--lora_rank", type=int, default=0, help="plan with LoRA adapters of rank r")
    p.add_argument("--lora_targets", default="", help="with --lora_rank: e.g. q,v (default all)")
    p.add_argument("--param_dtype", choices=("float32", "bfloat16"), default="")
    p.add_argument("--min_devices", action="store_true", help="the fewest devices that fit")
    args = p.parse_args(argv)

    if args.all:
        print(HEADER)
        fits = True
        for path in scale_configs(Path(args.configs)):
            config = _load(str(path))
            plan = planning.plan_memory(config)
            fits &= plan.fits
            print(summary_row(path.stem, plan, planning.paper_hardware_plan(config)))
        return 0 if fits else 1
    if not args.config:
        p.error("give a config file or --all")
    config = _load(args.config)
    problems = planning.validate(config)
    if problems:
        for problem in problems:
            print(f"{args.config}: {problem}", file=sys.stderr)
        return 2
    try:
        workload = dataclasses.replace(
            planning.workload_from_config(config), **_overrides(args, config)
        )
    except (planning.PlanError, hw_lib.HardwareError, ValueError) as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    plan = planning.plan(workload)
    lora = workload.cfg.lora
    print(
        f"{args.config}: {config.model.preset}, {planning.job_fields(config).algorithm}"
        + (f", LoRA rank {lora.rank} on {','.join(lora.targets)}" if lora else "")
        + f", base {workload.cfg.param_dtype}"
    )
    if args.min_devices:
        fewest = min_devices(workload)
        if fewest is None:
            print("no device count up to 1024 fits")
            return 1
        w = fewest.workload
        print(f"fewest devices that fit: {w.hardware.num_devices} (mesh {w.mesh})")
        plan = fewest
    print(plan.table())
    print(checked_note())
    if plan.fits:
        return 0
    steps, after = planning.suggest(workload)
    if steps:
        verdict = "fits" if after.fits else "still does not fit"
        print(f"\nto fit, change (mildest first; then {verdict} at {_gib(after.peak)} GiB):")
        for desc, override in steps:
            print(f"  {desc:<40} {override}")
    else:
        print("\nno change in the search space makes it fit; use a larger accelerator")
    return 1


if __name__ == "__main__":
    sys.exit(main())
