"""Shared test setup: 8 fake CPU devices for mesh tests, the shared data folder, small helpers."""

import os
from pathlib import Path

# Must happen before JAX initialises its backends: every test sees 8 CPU devices, so mesh tests
# (data=2, fsdp=2, tensor=2) run in the same process as single-device ones (which use device 0).
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One persistent compilation cache for the whole run, shared by both pytest workers and every
# launcher process a test starts (they inherit the environment): kill-and-resume runs, repeated
# trainers and the reproduction's stage processes compile the same programs again and again.
# Entries are keyed by the program, the compile options and the JAX version, so a hit is the
# same executable. A size limit turns on JAX's file lock, which the two workers need to share
# the folder safely.
_COMPILE_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jax-compile-tests"
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_COMPILE_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 * 2**30))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_default_matmul_precision", "highest")

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or a skip with a message when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


def pytest_collection_modifyitems(config, items):
    """Files holding heavy tests run first, each file's tests still together and in order: the
    two workers (`--dist loadfile`) then take the long files while both are free and end on
    short ones, instead of one worker finishing a long file alone at the end."""
    heavy_files = {item.path for item in items if item.get_closest_marker("heavy")}
    items.sort(key=lambda item: item.path not in heavy_files)  # stable: order kept otherwise


# A launched job finds the laboratory's data sources (config.data.path="synthetic") registered by
# memjax.jobs; tests that call a job's functions directly find them registered the same way.
from memjax.jobs import register_sources  # noqa: E402

register_sources()
