"""Keeps the libraries' log records (orbax, grain, jax, absl itself) out of a job's output.

orbax and grain log through absl, so their records reach the same handler as memjax's own
`absl.logging` calls; a record is told apart by the file that logged it. At the launcher's
default verbosity the libraries' INFO lines (orbax prints its whole CheckpointManagerOptions and
a dozen lines per save) are dropped, their warnings and errors kept; memjax's records all pass.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

_PACKAGE_DIR = str(Path(__file__).resolve().parent)

# Library warnings that name an expected event, not a problem: orbax warns at every save that
# carries no metric while a best-K policy is on, and memjax's schedule saves such steps on
# purpose (`memjax.training.schedule`: only evaluated steps are ranked).
EXPECTED_WARNINGS = ("Requested `tracked_metric`; did not provide metrics.",)


def from_memjax(record: logging.LogRecord) -> bool:
    return record.name.startswith("memjax") or str(record.pathname).startswith(_PACKAGE_DIR)


class LibraryFilter(logging.Filter):
    """Passes every memjax record and the libraries' records at `min_level` or above."""

    def __init__(self, min_level: int = logging.WARNING):
        super().__init__()
        self.min_level = min_level

    def filter(self, record: logging.LogRecord) -> bool:
        if from_memjax(record):
            return True
        if record.getMessage().startswith(EXPECTED_WARNINGS):
            return False
        return record.levelno >= self.min_level


@contextlib.contextmanager
def libraries_silenced(logger_name: str = "absl"):
    """Within the block, drops every library record of `logger_name` (orbax's and grain's go
    through "absl"): for work whose failures memjax reports itself, in one line."""
    logger = logging.getLogger(logger_name)
    quiet = LibraryFilter(min_level=logging.CRITICAL + 1)
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


__all__ = ["LibraryFilter", "from_memjax", "libraries_silenced"]
