"""What an ahead-of-time compile targets: a TPU slice described by libtpu, NVIDIA GPUs described
by memjax (memjax/aot/gpu_targets.py), or N CPU devices.

    target = tpu_target("v5p:2x2x1")        # 4 v5p chips, no TPU needed (libtpu installed)
    target = gpu_target("h100x8")           # 8 H100s, no GPU needed (jax[cuda12] installed)
    target = cpu_target(8, hardware)        # 8 host devices (XLA_FLAGS device count >= 8)

A TPU topology's devices come from `jax.experimental.topologies.get_topology_desc`, as
MaxText's train_compile.py gets them: programs lowered over a Mesh of those devices compile
with the TPU compiler and report its memory and costs, with no TPU attached. libtpu takes a
machine-wide lock file while loaded, so TPU compiles belong in a process (and an environment)
of their own (tools/aot_check.py; `make .venv-tpu`).
"""

from __future__ import annotations

import dataclasses
import os
import re

import jax

from memjax import hardware as hw_lib

# Topology name prefix -> memjax's accelerator name.
TPU_KINDS = {"v5p": "TPU-v5p", "v5e": "TPU-v5e", "v4": "TPU-v4"}

# A slice per device count for configs that name a GPU: v5p chips (95 GiB, the nearest to an
# 80 GiB H100), laid out as the smallest v5p topologies of that many chips.
DEFAULT_V5P = {4: "v5p:2x2x1", 8: "v5p:2x2x2", 16: "v5p:2x2x4", 32: "v5p:2x4x4", 64: "v5p:4x4x4"}


class TargetError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Target:
    name: str  # "v5p:2x2x1", "h100x8" or "cpu:8"
    devices: tuple
    hardware: hw_lib.Hardware  # what the memory is held against (HBM, peaks)

    @property
    def platform(self) -> str:
        return self.devices[0].platform

    @property
    def peak_flops(self) -> float:
        return self.hardware.accelerator.peak_tflops * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hardware.accelerator.hbm_gbps * 1e9


def default_topology(hardware: hw_lib.Hardware) -> str:
    """The TPU slice a config is compiled for: its own when it names a TPU (v5e: the 2-D
    torus of that many chips), else v5p chips of the same count."""
    n = hardware.num_devices
    kind = hardware.accelerator.gcloud_type
    if kind == "v5litepod":
        shapes = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8"}
        if n in shapes:
            return f"v5e:{shapes[n]}"
    elif n in DEFAULT_V5P:
        prefix = "v4" if kind == "v4" else "v5p"
        return DEFAULT_V5P[n].replace("v5p", prefix)
    raise TargetError(f"no default TPU topology for {n} devices; pass --topology")


def tpu_target(topology: str) -> Target:
    """The devices of a TPU slice, e.g. 'v5p:2x2x4' (16 chips) or 'v5e:4x4'."""
    m = re.fullmatch(r"(v5p|v5e|v4):(\d+(?:x\d+)+)", topology)
    if not m:
        raise TargetError(
            f"--topology {topology!r}: expected KIND:AxB[xC] with KIND one of {sorted(TPU_KINDS)}"
        )
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # no metadata server off a TPU VM
    try:
        from jax.experimental import topologies

        desc = topologies.get_topology_desc(topology_name=topology, platform="tpu")
    except Exception as e:  # libtpu missing, or its lock file held by another process
        raise TargetError(
            f"--topology {topology}: libtpu could not describe the slice ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}); install jax[tpu] (make .venv-tpu) "
            "and keep no other libtpu process running"
        ) from None
    devices = tuple(desc.devices)
    acc = hw_lib.accelerator(TPU_KINDS[m.group(1)])
    return Target(topology, devices, hw_lib.Hardware(acc, len(devices)))


def gpu_target(name: str) -> Target:
    """The devices of `name` ('h100x8', 'a100x8', 'h200x16'): that many GPUs of the card, 8 to
    a host, from XLA's GPU compiler given memjax's description of the card. Needs jax[cuda12]
    (make setup-gpu) and, with no GPU here, JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1
    set before JAX starts (tools/aot_check.py sets them)."""
    from memjax.aot import gpu_targets

    parsed = gpu_targets.parse_target(name)
    if parsed is None:
        raise TargetError(
            f"--target {name!r}: expected CARDxN with CARD one of "
            f"{sorted(gpu_targets.TARGET_NAMES)} (e.g. h100x8)"
        )
    card, n = parsed
    per_host = hw_lib.accelerator(card).devices_per_host
    if n > per_host and n % per_host:
        raise TargetError(f"--target {name}: {n} GPUs are not whole hosts of {per_host}")
    hosts, local = (n // per_host, per_host) if n > per_host else (1, n)
    try:
        from jax.experimental import topologies

        desc = topologies.get_topology_desc(
            platform="cuda",
            target_config=gpu_targets.target_config(card),
            topology=f"1x{hosts}x{local}",
        )
    except Exception as e:  # jax[cuda12] missing: no CUDA plugin to compile with
        raise TargetError(
            f"--target {name}: the CUDA compiler could not describe the devices "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); install "
            "jax[cuda12] (make setup-gpu) and run with JAX_PLATFORMS=cpu "
            "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1"
        ) from None
    devices = tuple(desc.devices)
    return Target(name.lower(), devices, hw_lib.Hardware(hw_lib.accelerator(card), len(devices)))


def cpu_target(n: int, hardware: hw_lib.Hardware) -> Target:
    """n host CPU devices, held against `hardware` (the config's own accelerator)."""
    devices = jax.devices("cpu")
    if len(devices) < n:
        raise TargetError(
            f"--cpu-devices {n}: only {len(devices)} CPU devices; set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n} before JAX starts"
        )
    return Target(f"cpu:{n}", tuple(devices[:n]), hw_lib.Hardware(hardware.accelerator, n))


__all__ = [
    "Target",
    "TargetError",
    "TPU_KINDS",
    "default_topology",
    "tpu_target",
    "gpu_target",
    "cpu_target",
]
