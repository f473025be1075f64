"""A CPU train step that would outgrow the host is refused before it runs, in one line.

On an accelerator XLA reports an allocation it cannot make (RESOURCE_EXHAUSTED). On the CPU it
allocates from host memory until the kernel kills the process, minutes into a run and with no
word of why (the Memory-R1 answer agent's GRPO step with nothing recomputed can need more
temporaries than a small host has: docs/results.md). XLA's own memory analysis of the compiled step says how much
it will take; compiling it ahead of the first call costs nothing extra (the call reuses it).
"""

from __future__ import annotations

from pathlib import Path

from memjax.errors import UserError

MEMINFO = Path("/proc/meminfo")


class HostMemoryError(UserError, MemoryError):
    """A compiled program needs more memory than the host has available."""


def available_bytes(meminfo: Path = MEMINFO) -> int | None:
    """The kernel's estimate of memory available without swapping, or None where unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def working_bytes(compiled) -> int | None:
    """Bytes a compiled program allocates beyond its arguments: temporaries and the outputs
    that do not reuse a donated argument's buffer (None when XLA gives no analysis)."""
    try:
        m = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):
        return None
    if m is None:
        return None
    return int(m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


def check_fits_host(compiled, what: str, fix: str) -> None:
    """Raises HostMemoryError when `compiled` needs more than the host has available."""
    need = working_bytes(compiled)
    available = available_bytes()
    if need is None or available is None or need <= available:
        return
    gib = lambda b: f"{b / 2**30:.1f} GiB"
    raise HostMemoryError(
        f"{what} needs {gib(need)} of working memory and the host has {gib(available)} "
        f"available: {fix}"
    )


__all__ = ["HostMemoryError", "available_bytes", "working_bytes", "check_fits_host"]
