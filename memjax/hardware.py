"""Accelerators a config can name: memory per device, devices per host, and TPU slice names.

`config.hardware = {"accelerator": "H100-80GB", "num_devices": 4}` names what a recipe was sized
for; the memory planner (tools/plan_memory.py) checks the config against it and the launchers
(launch/) turn it into hosts and processes.

HBM is the nominal capacity per JAX device. A TPU v4/v5p chip runs as one device (megacore);
its slice names count TensorCores (v5p-16 = 8 chips = 2 hosts of 4), v5e names count chips.
"""

from __future__ import annotations

import dataclasses
import math
import re

GIB = 1024**3


@dataclasses.dataclass(frozen=True)
class Accelerator:
    name: str
    kind: str  # "gpu" or "tpu"
    hbm_gib: float  # per JAX device
    devices_per_host: int
    gcloud_type: str = ""  # TPU: the accelerator-type prefix of `gcloud ... tpu-vm create`
    peak_tflops: float = 0.0  # dense bf16 matmul peak per device, as published
    hbm_gbps: float = 0.0  # HBM bandwidth per device (GB/s), as published

    @property
    def hbm_bytes(self) -> int:
        return int(self.hbm_gib * GIB)


ACCELERATORS = {
    a.name: a
    for a in (
        # Peaks: NVIDIA's H100 SXM / H200 / A100 data sheets (dense, no sparsity) and
        # Cloud TPU's system-architecture pages (per chip).
        Accelerator("H100-80GB", "gpu", 80, 8, peak_tflops=989, hbm_gbps=3350),
        Accelerator("H200", "gpu", 141, 8, peak_tflops=989, hbm_gbps=4800),
        Accelerator("A100-80GB", "gpu", 80, 8, peak_tflops=312, hbm_gbps=2039),
        Accelerator("A100-40GB", "gpu", 40, 8, peak_tflops=312, hbm_gbps=1555),
        Accelerator("TPU-v5p", "tpu", 95, 4, "v5p", peak_tflops=459, hbm_gbps=2765),
        Accelerator("TPU-v5e", "tpu", 16, 4, "v5litepod", peak_tflops=197, hbm_gbps=819),
        Accelerator("TPU-v4", "tpu", 32, 4, "v4", peak_tflops=275, hbm_gbps=1228),
    )
}

# What a plan may use: XLA needs room for its own temporaries, fragmentation and the runtime.
# The GPU launchers set XLA_PYTHON_CLIENT_MEM_FRACTION above this (see launch/).
USABLE_FRACTION = 0.9


class HardwareError(ValueError):
    pass


def accelerator(name: str) -> Accelerator:
    if name not in ACCELERATORS:
        raise HardwareError(
            f"unknown accelerator {name!r}; choose from {', '.join(sorted(ACCELERATORS))}"
        )
    return ACCELERATORS[name]


@dataclasses.dataclass(frozen=True)
class Hardware:
    accelerator: Accelerator
    num_devices: int

    @property
    def num_hosts(self) -> int:
        if self.accelerator.gcloud_type == "v5litepod" and self.num_devices <= 8:
            return 1  # v5e's single-host slices go up to 8 chips
        return math.ceil(self.num_devices / self.accelerator.devices_per_host)

    @property
    def devices_per_host(self) -> int:
        return self.num_devices // self.num_hosts

    @property
    def usable_bytes(self) -> int:
        return int(self.accelerator.hbm_bytes * USABLE_FRACTION)

    def describe(self) -> str:
        return f"{self.num_devices} x {self.accelerator.name}"

    def tpu_slice(self) -> str:
        """The gcloud accelerator type of a TPU slice with these chips (v5p-16, v5litepod-8)."""
        a = self.accelerator
        if a.kind != "tpu":
            raise HardwareError(f"{a.name} is not a TPU")
        cores = self.num_devices if a.gcloud_type == "v5litepod" else 2 * self.num_devices
        return f"{a.gcloud_type}-{cores}"


def from_config(section) -> Hardware:
    """A Hardware from `config.hardware` ({accelerator, num_devices})."""
    if section is None:
        raise HardwareError("the config has no hardware section ({accelerator, num_devices})")
    acc = accelerator(str(section["accelerator"]))
    n = int(section["num_devices"])
    if n <= 0:
        raise HardwareError(f"hardware.num_devices={n} must be positive")
    if n > acc.devices_per_host and n % acc.devices_per_host:
        raise HardwareError(
            f"hardware.num_devices={n}: {acc.name} hosts hold {acc.devices_per_host} devices; "
            f"a multi-host run uses whole hosts"
        )
    return Hardware(acc, n)


def parse_tpu_slice(name: str) -> Hardware:
    """'v5p-32' -> 16 x TPU-v5p; 'v5litepod-8' -> 8 x TPU-v5e; 'v4-16' -> 8 x TPU-v4."""
    m = re.fullmatch(r"(v5p|v5litepod|v4)-(\d+)", name)
    if not m:
        raise HardwareError(f"TPU slice {name!r}: expected v5p-N, v5litepod-N or v4-N")
    kind, count = m.group(1), int(m.group(2))
    acc = next(a for a in ACCELERATORS.values() if a.gcloud_type == kind)
    chips = count if kind == "v5litepod" else count // 2
    if chips <= 0 or (kind != "v5litepod" and count % 2):
        raise HardwareError(f"TPU slice {name!r}: {kind} sizes count TensorCores (even numbers)")
    return Hardware(acc, chips)


__all__ = [
    "GIB",
    "USABLE_FRACTION",
    "Accelerator",
    "ACCELERATORS",
    "Hardware",
    "HardwareError",
    "accelerator",
    "from_config",
    "parse_tpu_slice",
]
