"""NVIDIA GPUs described to XLA's GPU compiler, so that it compiles for cards that are not here.

    text = target_config("H100-80GB")          # an XLA GpuTargetConfig, in protobuf text form
    desc = topologies.get_topology_desc(platform="cuda", target_config=text, topology="1x1x8")

XLA's GPU compiler plans its kernels (tile sizes, shared memory, occupancy, which fusions
and which cuDNN and Triton kernels exist) from a device description: thread and block limits,
shared memory per block and per SM, SM count, memory bandwidth, L2, clock, device memory,
compute capability, and the cuDNN version it may call. On a machine with the card, the CUDA
runtime reports it; here it is written from each card's published figures (NVIDIA's data
sheets and the CUDA programming guide's table of per-compute-capability limits).

Run with `JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1` and jax[cuda12] installed
(`make setup-gpu`): the CUDA plugin then loads its compiler without looking for a driver.
"""

from __future__ import annotations

import dataclasses
import re

# cuDNN's release the compile may call: the jax[cuda12] wheels pull cuDNN 9. Fused attention
# (cuDNN's flash attention) needs 8.9.4 or later; 9.x is what a current host has.
CUDNN_VERSION = (9, 8, 0)


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """The figures XLA's GpuDeviceInfoProto carries, for one card."""

    description: str  # what the CUDA runtime names the card
    compute_capability: tuple[int, int]
    sm_count: int
    fp32_per_sm: int  # CUDA cores per SM ("fpus_per_core")
    boost_clock_ghz: float
    memory_bytes: int
    memory_bandwidth: int  # bytes/s
    l2_bytes: int
    shared_memory_per_sm: int
    shared_memory_per_block_optin: int  # a block's maximum after opting in
    threads_per_sm: int = 2048
    threads_per_block: int = 1024
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    shared_memory_per_block: int = 48 * 1024  # without opting in (every CUDA card)


GIB = 1024**3
MIB = 1024**2

# Published figures: NVIDIA's H100 SXM5, H200 SXM and A100 SXM4 data sheets (SMs, boost clock,
# memory and its bandwidth, L2) and the CUDA C++ programming guide's technical specifications
# per compute capability (shared memory, threads, registers). Memory sizes follow
# memjax.hardware's nominal GiB per device, so the compiler and the planner hold a program to
# the same capacity.
GPUS: dict[str, GpuSpec] = {
    "H100-80GB": GpuSpec(
        description="NVIDIA H100 80GB HBM3",
        compute_capability=(9, 0),
        sm_count=132,
        fp32_per_sm=128,
        boost_clock_ghz=1.98,
        memory_bytes=80 * GIB,
        memory_bandwidth=3_350_000_000_000,
        l2_bytes=50 * MIB,
        shared_memory_per_sm=228 * 1024,
        shared_memory_per_block_optin=227 * 1024,
    ),
    "H200": GpuSpec(
        description="NVIDIA H200",
        compute_capability=(9, 0),
        sm_count=132,
        fp32_per_sm=128,
        boost_clock_ghz=1.98,
        memory_bytes=141 * GIB,
        memory_bandwidth=4_800_000_000_000,
        l2_bytes=50 * MIB,
        shared_memory_per_sm=228 * 1024,
        shared_memory_per_block_optin=227 * 1024,
    ),
    "A100-80GB": GpuSpec(
        description="NVIDIA A100-SXM4-80GB",
        compute_capability=(8, 0),
        sm_count=108,
        fp32_per_sm=64,
        boost_clock_ghz=1.41,
        memory_bytes=80 * GIB,
        memory_bandwidth=2_039_000_000_000,
        l2_bytes=40 * MIB,
        shared_memory_per_sm=164 * 1024,
        shared_memory_per_block_optin=163 * 1024,
    ),
}

# --target names: a card and a device count ("h100x8"); the count may be any positive number.
TARGET_NAMES = {"h100": "H100-80GB", "h200": "H200", "a100": "A100-80GB"}
_TARGET = re.compile(r"(h100|h200|a100)x(\d+)")


def parse_target(name: str) -> tuple[str, int] | None:
    """'h100x8' -> ('H100-80GB', 8); None for a name that is not of that form."""
    m = _TARGET.fullmatch(name.lower())
    if not m or int(m.group(2)) <= 0:
        return None
    return TARGET_NAMES[m.group(1)], int(m.group(2))


def target_config(accelerator: str, cudnn: tuple[int, int, int] = CUDNN_VERSION) -> str:
    """XLA's GpuTargetConfigProto for `accelerator` (a GPUS key), in protobuf text form."""
    s = GPUS[accelerator]
    major, minor = s.compute_capability
    fields = [
        ("threads_per_block_limit", s.threads_per_block),
        ("threads_per_warp", 32),
        ("shared_memory_per_block", s.shared_memory_per_block),
        ("shared_memory_per_core", s.shared_memory_per_sm),
        ("threads_per_core_limit", s.threads_per_sm),
        ("core_count", s.sm_count),
        ("fpus_per_core", s.fp32_per_sm),
        ("block_dim_limit_x", 2**31 - 1),
        ("block_dim_limit_y", 65535),
        ("block_dim_limit_z", 65535),
        ("memory_bandwidth", s.memory_bandwidth),
        ("l2_cache_size", s.l2_bytes),
        ("clock_rate_ghz", s.boost_clock_ghz),
        ("device_memory_size", s.memory_bytes),
        ("shared_memory_per_block_optin", s.shared_memory_per_block_optin),
    ]
    info = "".join(f"  {k}: {v}\n" for k, v in fields)
    info += f"  cuda_compute_capability {{\n    major: {major}\n    minor: {minor}\n  }}\n"
    info += f"  registers_per_core_limit: {s.registers_per_sm}\n"
    info += f"  registers_per_block_limit: {s.registers_per_block}\n"
    dnn = (
        f"dnn_version_info {{\n  major: {cudnn[0]}\n  minor: {cudnn[1]}\n  patch: {cudnn[2]}\n}}\n"
    )
    return (
        f"gpu_device_info {{\n{info}}}\n"
        'platform_name: "CUDA"\n'
        f"{dnn}"
        f'device_description_str: "{s.description}"\n'
    )


__all__ = ["GPUS", "GpuSpec", "TARGET_NAMES", "parse_target", "target_config", "CUDNN_VERSION"]
