"""XManager-style launcher: a config in, a job for a GPU cluster or a TPU pod out.

    # GPU cluster through Slurm (one process per GPU; JAX reads Slurm's environment)
    python launch/xm_launch.py --config=configs/memsearcher_qwen14b.py --workdir=/ckpt/ms14b \
        --platform=gpu --dry_run -- --config.model.source=/models/Qwen2.5-14B-Instruct

    # GPU hosts over ssh (one process per host, coordinator on the first host)
    python launch/xm_launch.py --config=configs/grpo_qwen7b.py --workdir=/ckpt/g7 \
        --platform=gpu --gpu_launcher=ssh --hosts=gpu-a,gpu-b --dry_run

    # A TPU pod slice: every worker runs the same command through gcloud (--worker=all)
    python launch/xm_launch.py --config=configs/grpo_qwen7b.py --workdir=gs://bucket/g7 \
        --platform=tpu --tpu=v5p-16 --tpu_name=memjax-v5p --zone=us-east5-a --dry_run

Like an XManager experiment, the launcher first builds a job spec (hosts, processes, per-process
environment, the command, the config overrides that retarget the recipe's hardware and mesh,
and the memory plan for that target), then runs it. `--dry_run` prints the spec as one JSON
object, its "commands" included, and starts nothing. Arguments after `--` are passed to
`memjax.launch` unchanged (config overrides). No xmanager dependency: the "executors" are
`sbatch`, `ssh` and `gcloud`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

from memjax import hardware as hw_lib
from memjax import planning

REPO = Path(__file__).resolve().parents[1]
COORDINATOR_PORT = 8476
# XLA on GPU preallocates 75% of HBM by default; the memory plan budgets 90% for arrays.
GPU_ENV = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"}
TPU_RUNTIME = {
    "v5p": "v2-alpha-tpuv5",
    "v5litepod": "v2-alpha-tpuv5-lite",
    "v4": "tpu-ubuntu2204-base",
}


@dataclasses.dataclass
class JobSpec:
    name: str
    platform: str  # "gpu" or "tpu"
    accelerator: str
    num_hosts: int
    devices_per_host: int
    processes: int
    mesh: dict
    overrides: list[str]  # --config.* flags that retarget the recipe to this hardware
    command: list[str]  # what every process runs
    env: list[dict]  # per-process environment additions (empty when the cluster provides it)
    commands: list[str]  # the shell commands that launch the job
    memory_plan: dict

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def _load(path: str):
    return runpy.run_path(path)["get_config"]()


def _target(args, config) -> tuple[hw_lib.Hardware, dict, list[str]]:
    """The hardware and mesh to run on, and the overrides that say so to the config."""
    hardware = hw_lib.from_config(config.hardware)
    configured = planning.job_fields(config).mesh  # where the job's schema keeps it
    mesh = dict(configured)
    overrides = []
    if args.platform == "tpu":
        if not args.tpu:
            raise SystemExit("xm_launch: --platform=tpu needs --tpu=SLICE (e.g. v5p-16)")
        hardware = hw_lib.parse_tpu_slice(args.tpu)
        # Keep the recipe's tensor parallelism; the rest of the slice becomes fsdp.
        mesh = {"data": 1, "fsdp": -1, "tensor": int(configured["tensor"])}
    elif args.num_devices:
        hardware = hw_lib.Hardware(hardware.accelerator, args.num_devices)
        mesh = {**mesh, "fsdp": -1}
    if args.mesh:
        mesh = dict(zip(planning.MESH_AXES, map(int, args.mesh.split(","))))
    if hardware != hw_lib.from_config(config.hardware):
        overrides += [
            f"--config.hardware.accelerator={hardware.accelerator.name}",
            f"--config.hardware.num_devices={hardware.num_devices}",
        ]
    if mesh != configured:
        w = planning.workload_from_config(config)
        overrides += planning.mesh_override(w, mesh, hardware.num_devices).split()
    if hardware.accelerator.kind != args.platform:
        raise SystemExit(
            f"xm_launch: the config names {hardware.describe()}, not a {args.platform} target; "
            f"pass --platform={hardware.accelerator.kind}"
            + (" or --tpu=SLICE" if args.platform == "gpu" else "")
        )
    return hardware, mesh, overrides


def _memory(config, hardware, mesh) -> dict:
    w = planning.workload_from_config(config)
    w = dataclasses.replace(
        w, hardware=hardware, mesh=planning.resolve_mesh(mesh, hardware.num_devices)
    )
    p = planning.plan(w)
    gib = lambda b: round(b / hw_lib.GIB, 2)
    return {"peak_gib": gib(p.peak), "usable_gib": gib(p.usable), "fits": p.fits}


def _q(argv) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def build(args, passthrough: list[str]) -> JobSpec:
    config = _load(args.config)
    hardware, mesh, overrides = _target(args, config)
    name = args.name or Path(args.config).stem.replace("_", "-")
    command = [
        "python",
        "-m",
        "memjax.launch",
        f"--config={args.config}",
        f"--workdir={args.workdir}",
        *overrides,
        *passthrough,
    ]
    hosts, per_host = hardware.num_hosts, hardware.devices_per_host
    env: list[dict] = []
    commands: list[str] = []
    if args.platform == "gpu" and args.gpu_launcher == "slurm":
        # One task per GPU: JAX's Slurm detection gives each task the GPU of its local rank.
        processes = hardware.num_devices
        commands.append(
            _q(
                [
                    "sbatch",
                    f"--job-name={name}",
                    f"--nodes={hosts}",
                    f"--ntasks-per-node={per_host}",
                    f"--gpus-per-node={per_host}",
                    "launch/slurm.sh",
                    args.config,
                    args.workdir,
                    *overrides,
                    *passthrough,
                ]
            )
        )
        env = [dict(GPU_ENV)]
    elif args.platform == "gpu":
        host_list = [h for h in args.hosts.split(",") if h]
        if len(host_list) != hosts:
            raise SystemExit(
                f"xm_launch: {hardware.describe()} is {hosts} host(s); --hosts lists "
                f"{len(host_list)}"
            )
        processes = hosts  # one process per host drives all its GPUs
        coordinator = f"{host_list[0]}:{COORDINATOR_PORT}"
        for i, host in enumerate(host_list):
            e = {**GPU_ENV}
            if hosts > 1:
                e.update(
                    JAX_COORDINATOR_ADDRESS=coordinator,
                    JAX_NUM_PROCESSES=str(hosts),
                    JAX_PROCESS_ID=str(i),
                )
            env.append(e)
            remote = " ".join(f"{k}={v}" for k, v in e.items())
            commands.append(
                f"ssh {host} {shlex.quote(f'cd {args.remote_dir} && {remote} {_q(command)}')}"
            )
    else:
        processes = hosts  # one process per TPU VM worker
        if not (args.tpu_name and args.zone):
            raise SystemExit("xm_launch: --platform=tpu needs --tpu_name and --zone")
        where = [f"--zone={args.zone}"] + ([f"--project={args.project}"] if args.project else [])
        gcloud = ["gcloud", "compute", "tpus", "tpu-vm"]
        if args.create:
            runtime = TPU_RUNTIME[hardware.accelerator.gcloud_type]
            commands.append(
                _q(
                    [*gcloud, "create", args.tpu_name, *where]
                    + [f"--accelerator-type={args.tpu}", f"--version={runtime}"]
                )
            )
        commands.append(
            _q(
                [*gcloud, "scp", "--recurse", str(REPO), f"{args.tpu_name}:~/"]
                + ["--worker=all", *where]
            )
        )
        # MEMJAX_DISTRIBUTED=auto: every worker calls jax.distributed.initialize(), which
        # learns the slice's peers from the TPU metadata server.
        env = [{"MEMJAX_DISTRIBUTED": "auto"}]
        remote = f"cd ~/{REPO.name} && MEMJAX_DISTRIBUTED=auto {_q(command)}"
        commands.append(
            _q([*gcloud, "ssh", args.tpu_name, *where, "--worker=all", f"--command={remote}"])
        )
    return JobSpec(
        name=name,
        platform=args.platform,
        accelerator=hardware.accelerator.name,
        num_hosts=hosts,
        devices_per_host=per_host,
        processes=processes,
        mesh=planning.resolve_mesh(mesh, hardware.num_devices),
        overrides=overrides,
        command=command,
        env=env,
        commands=commands,
        memory_plan=_memory(config, hardware, mesh),
    )


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", required=True, help="configs/NAME.py (names its hardware)")
    p.add_argument("--workdir", required=True)
    p.add_argument("--platform", choices=("gpu", "tpu"), required=True)
    p.add_argument("--name", default="")
    p.add_argument("--mesh", default="", help="data,fsdp,tensor (default: the config's)")
    p.add_argument("--num_devices", type=int, default=0, help="GPU: more or fewer devices")
    p.add_argument("--gpu_launcher", choices=("slurm", "ssh"), default="slurm")
    p.add_argument("--hosts", default="", help="ssh: comma-separated hosts, coordinator first")
    p.add_argument("--remote_dir", default=str(REPO), help="ssh: the repository on the hosts")
    p.add_argument("--tpu", default="", help="TPU slice, e.g. v5p-16")
    p.add_argument("--tpu_name", default="")
    p.add_argument("--zone", default="")
    p.add_argument("--project", default="")
    p.add_argument("--create", action="store_true", help="TPU: create the slice first")
    p.add_argument("--dry_run", action="store_true", help="print the spec, launch nothing")
    if "--" in argv:
        i = argv.index("--")
        return p.parse_args(argv[:i]), argv[i + 1 :]
    return p.parse_args(argv), []


def main(argv=None) -> int:
    args, passthrough = parse(sys.argv[1:] if argv is None else argv)
    spec = build(args, passthrough)
    print(spec.to_json())
    if args.dry_run:
        return 0
    if not spec.memory_plan["fits"]:
        print(
            f"xm_launch: {args.config} does not fit {spec.accelerator} "
            f"({spec.memory_plan}); see tools/plan_memory.py",
            file=sys.stderr,
        )
        return 1
    if args.platform == "gpu" and args.gpu_launcher == "ssh":
        # All hosts at once: each process waits for the others at the coordinator.
        procs = [subprocess.Popen(c, shell=True, cwd=REPO) for c in spec.commands]
        return max(p.wait() for p in procs)
    for c in spec.commands:
        rc = subprocess.run(c, shell=True, cwd=REPO).returncode
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
