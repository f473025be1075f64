"""The environment a test gives a `python -m memjax.launch` subprocess: a user's (one CPU
device, no test-only JAX or memjax settings), but sharing the tests' persistent compilation
cache, so that a killed run's restart and repeated recipes do not compile everything again."""

import os

# tests/conftest.py sets these; a hit is the same executable, keyed by program and options.
COMPILE_CACHE_VARS = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_COMPILATION_CACHE_MAX_SIZE",
)


def user_env(drop=("XLA_", "JAX_", "MEMJAX_")) -> dict:
    """os.environ without the variables whose names start with `drop` (XLA_FLAGS carries the
    tests' eight fake devices), the compilation cache's kept."""
    return {
        k: v
        for k, v in os.environ.items()
        if k in COMPILE_CACHE_VARS or not k.startswith(tuple(drop))
    }
