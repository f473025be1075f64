"""Multi-host start-up: when to call `jax.distributed.initialize()`, and who writes what.

A run is multi-process when one of these says so (first match wins):

1. the config: `config.distributed.coordinator` ("host:port") with `num_processes` and
   `process_id` (for hand-started runs and tests);
2. our launch scripts' environment: `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`,
   `JAX_PROCESS_ID` (launch/slurm.sh, launch/xm_launch.py's GPU jobs);
3. Slurm: several tasks of one `srun` step (`SLURM_NTASKS` > 1); JAX reads the node list;
4. a TPU pod: more than one worker in `TPU_WORKER_HOSTNAMES` / `TPU_PROCESS_ADDRESSES`, a
   multislice `MEGASCALE_COORDINATOR_ADDRESS`, or `MEMJAX_DISTRIBUTED=auto` (set by
   launch/tpu_vm.sh, because a Cloud TPU VM learns its peers from the metadata server, which
   no environment variable shows).

Otherwise nothing is initialised and a single host runs unchanged. `MEMJAX_DISTRIBUTED=off`
turns detection off. `plan_initialization` is a pure function of (config, environment), so the
decision is testable without starting anything.

After start-up every process runs the same program on its own devices: each reads its own
shard of the data (`data_shard`, `grain_shard_options`), metrics and reports come from
process 0 only (`is_primary`), and orbax writes checkpoints cooperatively from all processes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from memjax.errors import ConfigError

ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
ENV_SWITCH = "MEMJAX_DISTRIBUTED"  # "auto": let JAX detect the cluster; "off": never initialise


class DistributedConfigError(ConfigError):
    """A launcher environment or config.distributed value that cannot start the runtime."""


@dataclasses.dataclass(frozen=True)
class InitPlan:
    """How to call `jax.distributed.initialize`; None fields are left to JAX's auto-detection."""

    source: str  # "config", "env", "slurm", "tpu" or "auto": what made the run multi-process
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    cluster_detection_method: str | None = None
    initialization_timeout: int = 300

    def kwargs(self) -> dict[str, Any]:
        out = {
            "coordinator_address": self.coordinator_address,
            "num_processes": self.num_processes,
            "process_id": self.process_id,
            "initialization_timeout": self.initialization_timeout,
        }
        if self.cluster_detection_method is not None:
            out["cluster_detection_method"] = self.cluster_detection_method
        return out


def _int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DistributedConfigError(f"{name}={value!r} is not an integer") from None


def _explicit(source, coordinator, num, pid, names, timeout) -> InitPlan | None:
    if num is None or pid is None:
        missing = [n for n, v in zip(names, (num, pid)) if v is None]
        raise DistributedConfigError(
            f"coordinator {coordinator!r} is set ({source}) but {', '.join(missing)} is not; "
            "a multi-process run needs all three"
        )
    num, pid = _int(num, names[0]), _int(pid, names[1])
    if not 0 <= pid < num:
        raise DistributedConfigError(f"{names[1]}={pid} is outside [0, {names[0]}={num})")
    if num == 1:  # one process: nothing to coordinate
        return None
    return InitPlan(source, coordinator, num, pid, "deactivate", timeout)


def plan_initialization(
    config: Mapping | None = None, environ: Mapping[str, str] | None = None
) -> InitPlan | None:
    """The initialisation a run needs, or None for a single process (see the module doc)."""
    env = os.environ if environ is None else environ
    switch = env.get(ENV_SWITCH, "").lower()
    if switch in ("off", "0", "false"):
        return None
    section = (config or {}).get("distributed") or {}
    timeout = int(section.get("initialization_timeout", 300) or 300)

    coordinator = section.get("coordinator") or ""
    if coordinator:
        num = section.get("num_processes")
        pid = section.get("process_id")
        num = None if num in (None, 0) else num
        pid = None if pid in (None, -1) else pid
        names = ("config.distributed.num_processes", "config.distributed.process_id")
        return _explicit("config", coordinator, num, pid, names, timeout)

    if env.get(ENV_COORDINATOR):
        return _explicit(
            "env",
            env[ENV_COORDINATOR],
            env.get(ENV_NUM_PROCESSES),
            env.get(ENV_PROCESS_ID),
            (ENV_NUM_PROCESSES, ENV_PROCESS_ID),
            timeout,
        )

    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_PROCID")
    if all(v in env for v in slurm) and _int(env.get("SLURM_NTASKS", "1"), "SLURM_NTASKS") > 1:
        return InitPlan("slurm", cluster_detection_method="slurm", initialization_timeout=timeout)

    hosts = env.get("TPU_PROCESS_ADDRESSES") or env.get("TPU_WORKER_HOSTNAMES") or ""
    if len([h for h in hosts.split(",") if h.strip()]) > 1 or env.get(
        "MEGASCALE_COORDINATOR_ADDRESS"
    ):
        return InitPlan("tpu", initialization_timeout=timeout)

    if switch == "auto":
        return InitPlan("auto", initialization_timeout=timeout)
    return None


def maybe_initialize(config: Mapping | None = None) -> InitPlan | None:
    """Starts JAX's distributed runtime when the run is multi-process; returns what it did.

    Must run before anything touches a JAX backend (the launcher calls it first thing).
    """
    plan = plan_initialization(config)
    if plan is None:
        return None
    import jax

    if jax.distributed.is_initialized():  # a test or a notebook did it already
        return plan
    # CPU multi-process runs (tests, debugging) need cross-process collectives on CPU too.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**plan.kwargs())
    return plan


# ------------------------------------------------------------------------------ per process


def process_index() -> int:
    import jax

    return jax.process_index()


def process_count() -> int:
    import jax

    return jax.process_count()


def is_primary() -> bool:
    """True on the process that writes metrics, reports and plots (process 0)."""
    return process_index() == 0


def data_shard() -> tuple[int, int]:
    """(shard_index, shard_count) for this host: pass to `memjax.data.qa_pipeline.qa_loader`."""
    return process_index(), process_count()


def grain_shard_options(drop_remainder: bool = True):
    """grain ShardOptions for this host (for `memjax.data.locomo_pipeline.qa_data_loader`).

    drop_remainder=True gives every host the same number of records, so no host waits in a
    collective for a batch that another host never produces.
    """
    import grain

    index, count = data_shard()
    return grain.sharding.ShardOptions(index, count, drop_remainder=drop_remainder)


def host_batch_size(global_batch: int) -> int:
    """Rows of a global batch that this host loads (the batch must divide evenly)."""
    count = process_count()
    if global_batch % count:
        raise DistributedConfigError(
            f"global batch {global_batch} does not split evenly over {count} processes"
        )
    return global_batch // count


def global_batch(local: Mapping[str, Any], mesh, rules) -> dict[str, Any]:
    """Global jax.Arrays from this host's rows of a batch.

    Each host loads only its own rows (its data shard); the rows of host i come before those of
    host i + 1, and the leading (batch) dimension is sharded over the mesh's data and fsdp axes
    as the train step expects. On one host this is a plain device_put with the same layout.
    """
    import jax

    from memjax.parallel import named_sharding

    out = {}
    for name, rows in local.items():
        axes = ("batch", "seq")[: rows.ndim] + (None,) * max(0, rows.ndim - 2)
        shape = (rows.shape[0] * process_count(), *rows.shape[1:])
        sharding = named_sharding(mesh, rules, axes, shape)
        out[name] = jax.make_array_from_process_local_data(sharding, rows, shape)
    return out


__all__ = [
    "InitPlan",
    "DistributedConfigError",
    "plan_initialization",
    "maybe_initialize",
    "process_index",
    "process_count",
    "is_primary",
    "data_shard",
    "grain_shard_options",
    "host_batch_size",
    "global_batch",
]
