"""An XManager experiment of memjax jobs: a config (and a sweep of overrides) in, work units out.

    pip install -e '.[launch]'           # xmanager (and xmanager-slurm for --executor=slurm)

    # on this machine (xm_local.Local): one process per work unit
    python launch/xm_launch.py --config=configs/toy_grpo.py --workdir=/tmp/xm_toy \
        --sweep=seed=0,1 -- --config.num_steps=4

    # Vertex AI: the config's GPUs per replica, one replica per host
    python launch/xm_launch.py --config=configs/grpo_qwen7b.py --workdir=gs://bucket/g7 \
        --executor=vertex -- --config.model.source=gs://bucket/Qwen2.5-7B-Instruct

    # Kubernetes (GKE) on a TPU slice; Slurm through xmanager-slurm
    python launch/xm_launch.py --config=configs/grpo_qwen7b.py --workdir=gs://bucket/g7 \
        --executor=kubernetes --tpu=v5p-16
    python launch/xm_launch.py --config=configs/memsearcher_qwen14b.py --workdir=/ckpt/ms14b \
        --executor=slurm --slurm_host=login.cluster --slurm_partition=h100

Every work unit runs `python -m memjax.launch --config=CONFIG --workdir=WORKDIR[/wu<N>]
--config.k=v ...`: the arguments after `--` go to every unit, `--sweep=key=v1,v2` (repeatable)
makes one unit per combination, each in its own workdir. Before anything is built or submitted,
each unit's command runs with `--dry_run` (config, inputs and the memory plan for its hardware);
a unit it refuses stops the launch with that one line (exit 2). `--dry_run` here checks the
same and prints the experiment (units, executor, requirements, image) as JSON, submitting nothing.

Local jobs run from this checkout with this interpreter. The cloud executors run an image built
from this checkout's wheel (`pip wheel .`) and its configs/, installed with pip in the image: the
checkout itself (its .venv, data, workdirs) is never copied.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from absl import app, flags

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # memjax from this checkout, also when it is not installed

from memjax import hardware as hw_lib  # noqa: E402
from memjax import planning  # noqa: E402
from memjax import workdir as workdir_lib  # noqa: E402

EXECUTORS = ("local", "vertex", "kubernetes", "slurm")
# XLA on GPU preallocates 75% of HBM by default; the memory plan budgets 90% for arrays.
GPU_ENV = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"}
TPU_ENV = {"MEMJAX_DISTRIBUTED": "auto"}  # each worker finds its peers (TPU metadata server)
BASE_IMAGE = "python:3.11-slim"
# memjax's accelerator names -> xmanager's resource types (Vertex AI, Kubernetes, Slurm)
XM_RESOURCE = {
    "H100-80GB": "H100",
    "H200": "H200",
    "A100-80GB": "A100_80GIB",
    "A100-40GB": "A100",
    "TPU-v5p": "TPU_V5P",
    "TPU-v5e": "TPU_V5E",
    "TPU-v4": "TPU_V4",
}
VERTEX_TPUS = ("TPU_V2", "TPU_V3")  # what xmanager's Vertex AI machine specs know

# The launcher's own flags: memjax.launch (imported by tests in the same process) owns --config
# and --workdir in absl's global flags; xmanager's --xm_* flags stay global.
FLAGS = flags.FlagValues()
flags.DEFINE_string("config", None, "configs/NAME.py (names its hardware)", flag_values=FLAGS)
flags.DEFINE_string("workdir", None, "a local folder, a shared path or gs://...", flag_values=FLAGS)
flags.DEFINE_enum("executor", "local", EXECUTORS, "where the jobs run", flag_values=FLAGS)
flags.DEFINE_multi_string("sweep", [], "key=v1,v2: one work unit per value", flag_values=FLAGS)
flags.DEFINE_string("name", "", "experiment title (default: the config's name)", flag_values=FLAGS)
flags.DEFINE_string("tpu", "", "run on this TPU slice (e.g. v5p-16)", flag_values=FLAGS)
flags.DEFINE_integer("num_devices", 0, "GPU: more or fewer than the config's", flag_values=FLAGS)
flags.DEFINE_string("base_image", BASE_IMAGE, "image the wheel is installed in", flag_values=FLAGS)
flags.DEFINE_string("image_tag", "", "slurm: where the image is pushed", flag_values=FLAGS)
flags.DEFINE_string("slurm_host", "", "slurm: the login node (ssh)", flag_values=FLAGS)
flags.DEFINE_string("slurm_user", None, "slurm: ssh user", flag_values=FLAGS)
flags.DEFINE_string("slurm_partition", None, "slurm: partition", flag_values=FLAGS)
flags.DEFINE_string("slurm_account", None, "slurm: account", flag_values=FLAGS)
flags.DEFINE_float("slurm_hours", 24.0, "slurm: time limit", flag_values=FLAGS)
flags.DEFINE_bool(
    "dry_run", False, "check and print the experiment, submit nothing", flag_values=FLAGS
)


@dataclasses.dataclass(frozen=True)
class Options:
    """The launcher's flags, as the functions below take them."""

    config: str
    workdir: str
    executor: str = "local"
    sweep: tuple[str, ...] = ()
    name: str = ""
    tpu: str = ""
    num_devices: int = 0
    base_image: str = BASE_IMAGE
    image_tag: str = ""
    slurm_host: str = ""
    slurm_user: str | None = None
    slurm_partition: str | None = None
    slurm_account: str | None = None
    slurm_hours: float = 24.0
    dry_run: bool = False

    @classmethod
    def from_flags(cls) -> Options:
        return cls(**{f.name: getattr(FLAGS, f.name) for f in dataclasses.fields(cls)})


class LaunchError(Exception):
    """Something the user can fix: printed as one line, exit 2."""


class UnitFailed(Exception):
    """A local work unit exited non-zero: one line, exit 1."""


@dataclasses.dataclass(frozen=True)
class Target:
    """The hardware the jobs run on and the overrides that tell the config so."""

    hardware: hw_lib.Hardware | None  # None: a CPU config, run locally as it is
    mesh: dict
    overrides: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Unit:
    """One work unit: its workdir and the memjax.launch arguments after --config."""

    workdir: str
    args: tuple[str, ...]

    def launch_args(self, config: str) -> list[str]:
        return ["-m", "memjax.launch", f"--config={config}", f"--workdir={self.workdir}"] + list(
            self.args
        )


def target(config, opts: Options) -> Target:
    """The config's hardware, or the TPU slice / GPU count asked for instead. A config that
    names no hardware (the CPU configs) runs locally only."""
    if config.get("hardware") is None:
        if opts.executor != "local" or opts.tpu or opts.num_devices:
            raise LaunchError(
                f"--config={opts.config} names no hardware (config.hardware): it runs with "
                "--executor=local only"
            )
        return Target(None, {}, ())
    hardware = hw_lib.from_config(config.hardware)
    configured = planning.job_fields(config).mesh  # where the job's schema keeps it
    mesh = dict(configured)
    if opts.tpu:
        try:
            hardware = hw_lib.parse_tpu_slice(opts.tpu)
        except hw_lib.HardwareError as e:
            raise LaunchError(f"--tpu={opts.tpu}: {e}") from None
        mesh = {"data": 1, "fsdp": -1, "tensor": int(configured["tensor"])}  # fsdp takes the rest
    elif opts.num_devices:
        hardware = hw_lib.Hardware(hardware.accelerator, opts.num_devices)
        mesh = {**mesh, "fsdp": -1}
    overrides: list[str] = []
    if hardware != hw_lib.from_config(config.hardware):
        overrides += [
            f"--config.hardware.accelerator={hardware.accelerator.name}",
            f"--config.hardware.num_devices={hardware.num_devices}",
        ]
    if mesh != configured:
        w = planning.workload_from_config(config)
        overrides += planning.mesh_override(w, mesh, hardware.num_devices).split()
    return Target(hardware, mesh, tuple(overrides))


def sweep_points(sweeps: list[str]) -> list[list[str]]:
    """`["seed=0,1", "lr=1e-6,3e-6"]` -> one override list per combination (4 here)."""
    axes = []
    for sweep in sweeps:
        key, sep, values = sweep.partition("=")
        key = key.removeprefix("config.")
        if not sep or not key or not values:
            raise LaunchError(f"--sweep={sweep}: write --sweep=field=v1,v2 (e.g. seed=0,1)")
        axes.append([f"--config.{key}={v}" for v in values.split(",")])
    return [list(point) for point in itertools.product(*axes)]


def work_units(workdir: str, common: list[str], sweeps: list[str]) -> list[Unit]:
    points = sweep_points(sweeps)
    if len(points) == 1:
        return [Unit(workdir, tuple(common + points[0]))]
    # one workdir per unit: checkpoints of different settings never meet
    base = workdir.rstrip("/")
    return [Unit(f"{base}/wu{i}", tuple(common + p)) for i, p in enumerate(points, start=1)]


def check_plan(config: str, unit: Unit) -> None:
    """memjax.launch's dry run of the unit: config, inputs and memory plan; any refusal stops
    the launch with its own last line."""
    cmd = [sys.executable, *unit.launch_args(config), "--dry_run"]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["(no output)"]
        raise LaunchError(f"{unit.workdir}: the dry run refuses the unit: {lines[-1]}")


def job_env(hardware: hw_lib.Hardware) -> dict[str, str]:
    return dict(TPU_ENV if hardware.accelerator.kind == "tpu" else GPU_ENV)


# ------------------------------------------------------------------------------ executors


def resources(hardware: hw_lib.Hardware, executor: str) -> dict:
    """What one replica asks for, and how many replicas: a host each (Vertex AI, Kubernetes),
    a task per device (Slurm: JAX reads the step's ranks, one GPU per task)."""
    kind = XM_RESOURCE[hardware.accelerator.name]
    if executor == "vertex" and hardware.accelerator.kind == "tpu" and kind not in VERTEX_TPUS:
        raise LaunchError(
            f"--executor=vertex: xmanager's Vertex AI jobs take TPU v2/v3 only, not "
            f"{hardware.describe()}; use --executor=kubernetes or launch/tpu_vm.sh"
        )
    if executor == "slurm":
        return {"resource": kind, "per_replica": 1, "replicas": hardware.num_devices}
    return {
        "resource": kind,
        "per_replica": hardware.devices_per_host,
        "replicas": hardware.num_hosts,
    }


def make_executor(name: str, hardware: hw_lib.Hardware, opts: Options):
    from xmanager import xm, xm_local

    if name == "local":
        return xm_local.Local(experimental_stream_output=True)
    r = resources(hardware, name)
    if name in ("vertex", "kubernetes"):
        req = xm.JobRequirements(
            {xm.ResourceType[r["resource"]]: r["per_replica"]}, replicas=r["replicas"]
        )
        if name == "vertex":
            return xm_local.Vertex(requirements=req)
        tpu = None
        if hardware.accelerator.kind == "tpu":
            tpu = xm_local.TpuCapability(tpu_runtime_version=hardware.accelerator.gcloud_type)
        return xm_local.Kubernetes(requirements=req, tpu_capability=tpu)
    return _slurm_executor(r, opts)


def _slurm_executor(r: dict, opts: Options):
    import datetime

    import xm_slurm
    from xm_slurm import config as slurm_config

    if not opts.slurm_host:
        raise LaunchError("--executor=slurm needs --slurm_host=LOGIN_NODE (reached over ssh)")
    cluster = slurm_config.SlurmClusterConfig(
        name=opts.slurm_host,
        ssh=slurm_config.SSHConfig(
            endpoints=(slurm_config.Endpoint(opts.slurm_host, None),), user=opts.slurm_user
        ),
        runtime=slurm_config.ContainerRuntime.APPTAINER,
        account=opts.slurm_account,
        partition=opts.slurm_partition,
    )
    requirements = xm_slurm.JobRequirements(
        resources={xm_slurm.ResourceType[r["resource"]]: r["per_replica"]},
        replicas=r["replicas"],
        cluster=cluster,
    )
    return xm_slurm.Slurm(
        requirements=requirements, time=datetime.timedelta(hours=opts.slurm_hours)
    )


# ------------------------------------------------------------------------------ the image


def image_extras(hardware: hw_lib.Hardware) -> str:
    return "tpu,gcs" if hardware.accelerator.kind == "tpu" else "cuda,gcs"


def dockerfile(base_image: str, extras: str) -> str:
    """The job image: this checkout's wheel installed with pip, and its configs/."""
    return "\n".join(
        [
            f"FROM {base_image}",
            "ENV PYTHONUNBUFFERED=1",
            "WORKDIR /memjax",
            "COPY dist/ dist/",
            f'RUN pip install --no-cache-dir "$(ls dist/memjax-*.whl)[{extras}]"',
            "COPY configs/ configs/",
            'ENTRYPOINT ["python"]',
            "",
        ]
    )


def stage_image(stage: Path, base_image: str, extras: str) -> Path:
    """A build context of the wheel, configs/ and the Dockerfile (nothing else of the checkout)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(stage / "dist"), str(REPO)],
        check=True,
    )
    shutil.copytree(
        REPO / "configs", stage / "configs", ignore=shutil.ignore_patterns("__pycache__")
    )
    (stage / "Dockerfile").write_text(dockerfile(base_image, extras))
    return stage / "Dockerfile"


def packageable(executor: str, stage: Path | None, opts: Options):
    from xmanager import xm, xm_local

    if executor == "local":
        return xm.binary(executor_spec=xm_local.Local.Spec(), path=sys.executable)
    if executor == "slurm":
        import xm_slurm

        return xm_slurm.docker_container(
            executor_spec=xm_slurm.Slurm.Spec(tag=opts.image_tag or None),
            dockerfile=stage / "Dockerfile",
            context=stage,
        )
    spec = xm_local.Vertex.Spec() if executor == "vertex" else xm_local.Kubernetes.Spec()
    return xm.dockerfile_container(
        executor_spec=spec, path=str(stage), dockerfile=str(stage / "Dockerfile")
    )


# ------------------------------------------------------------------------------ the experiment


def submit(opts: Options, tgt: Target, config: str, units: list[Unit]) -> None:
    """Creates the experiment and adds one job per unit; local jobs are waited for."""
    from xmanager import xm

    if opts.executor == "slurm":
        import xm_slurm

        create = xm_slurm.create_experiment
    else:
        from xmanager import xm_local

        create = xm_local.create_experiment
    # local: this checkout's memjax, whatever the cwd; cloud: the image's
    env = {"PYTHONPATH": str(REPO)} if opts.executor == "local" else job_env(tgt.hardware)
    with tempfile.TemporaryDirectory(prefix="memjax-image-") as tmp:
        stage = None
        if opts.executor != "local":
            stage = Path(tmp)
            stage_image(stage, opts.base_image, image_extras(tgt.hardware))
        try:
            with create(experiment_title=title(opts)) as experiment:
                [executable] = experiment.package([packageable(opts.executor, stage, opts)])
                for unit in units:
                    executor = make_executor(opts.executor, tgt.hardware, opts)
                    job = xm.Job(executable, executor, args=unit.launch_args(config), env_vars=env)
                    experiment.add(job)
                print(
                    f"xm_launch: experiment {experiment.experiment_id}: {len(units)} work unit(s)"
                )
        except RuntimeError as e:  # xm_local: a local job exited non-zero (its output is above)
            if opts.executor != "local":
                raise
            raise UnitFailed(f"a work unit failed: {str(e).splitlines()[0]}") from None


def title(opts: Options) -> str:
    return opts.name or Path(opts.config).stem.replace("_", "-")


def describe(opts: Options, tgt: Target, config: str, units: list[Unit]) -> dict:
    """The experiment as --dry_run prints it."""
    out = {
        "experiment": title(opts),
        "executor": opts.executor,
        "work_units": [
            {"workdir": u.workdir, "command": ["python", *u.launch_args(config)]} for u in units
        ],
    }
    if tgt.hardware is not None:
        out["hardware"] = tgt.hardware.describe()
        out["mesh"] = planning.resolve_mesh(tgt.mesh, tgt.hardware.num_devices)
    if opts.executor != "local":
        out["requirements"] = resources(tgt.hardware, opts.executor)
        out["env"] = job_env(tgt.hardware)
        out["dockerfile"] = dockerfile(opts.base_image, image_extras(tgt.hardware))
    return out


def job_config(opts: Options) -> str:
    """The config path a job reads: this file (local jobs), or its place under configs/ in the
    image (cloud jobs, whose image carries configs/)."""
    path = Path(opts.config).resolve()
    if opts.executor == "local":
        return str(path)
    if not path.is_relative_to(REPO / "configs"):
        raise LaunchError(f"--config={opts.config}: cloud jobs take a config under configs/")
    return str(path.relative_to(REPO))


def plan(opts: Options, overrides: list[str]) -> tuple[Target, list[Unit]]:
    """Checks the flags and every unit's dry run; the target and the units to submit."""
    if not opts.config or not opts.workdir:
        raise LaunchError("--config=configs/NAME.py and --workdir=DIR are required")
    if not Path(opts.config).is_file():
        raise LaunchError(f"--config={opts.config}: no such file")
    workdir_lib.check(opts.workdir)
    config = runpy.run_path(opts.config)["get_config"]()
    tgt = target(config, opts)
    units = work_units(opts.workdir, list(tgt.overrides) + overrides, list(opts.sweep))
    for unit in units:
        check_plan(str(Path(opts.config).resolve()), unit)
    return tgt, units


def launch(opts: Options, overrides: list[str]) -> None:
    tgt, units = plan(opts, overrides)
    config = job_config(opts)
    if opts.executor != "local" and not workdir_lib.is_remote(opts.workdir):
        print(f"xm_launch: note: every host of the job must see {opts.workdir} (a shared path)")
    if opts.dry_run:
        print(json.dumps(describe(opts, tgt, config, units), indent=2))
        return
    submit(opts, tgt, config, units)


def parse(argv: list[str]) -> list[str]:
    """The launcher's flags, then xmanager's (global) ones; what follows `--` is returned.
    `--dry_run` after `--` is still the launcher's (its check runs every unit's dry run)."""
    if "--" in argv and "--dry_run" in argv[argv.index("--") :]:
        cut = argv.index("--")
        argv = argv[:cut] + ["--dry_run"] + [a for a in argv[cut:] if a != "--dry_run"]
    rest = FLAGS(argv, known_only=True)
    return flags.FLAGS(rest)


def main(argv: list[str]) -> None:
    try:
        launch(Options.from_flags(), argv[1:])
    except (LaunchError, ValueError) as e:  # memjax's ConfigError/HardwareError are ValueErrors
        print(f"xm_launch: error: {str(e).splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    except UnitFailed as e:
        print(f"xm_launch: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main, flags_parser=parse)
