"""Keeps the libraries' log records (orbax, grain, jax, absl itself) out of a job's output.

orbax and grain log through absl, so their records reach the same handler as memjax's own
`absl.logging` calls; a record is told apart by the file that logged it. At the launcher's
default verbosity the libraries' INFO lines (orbax prints its whole CheckpointManagerOptions and
a dozen lines per save) are dropped, their warnings and errors kept; memjax's records all pass.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
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


def _is_late_read_error(exc: BaseException | None) -> bool:
    """A read of a checkpoint already reported damaged, failing after its restore gave up:
    tensorstore finishes the sibling reads in its own threads, and their results reach an
    asyncio loop orbax has closed, or an exception object nobody collects."""
    if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
        return True
    return "TensorStore" in str(exc) or type(exc).__module__.startswith("tensorstore")


class _LateReadErrorFilter(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for a late read error: orbax's
    sibling read tasks of a failed restore, collected whenever the garbage collector runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_late_read_error(exc):
            _debug_late(exc)
            return False
        return True


def _debug_late(exc: BaseException | None) -> None:
    logging.getLogger("memjax").debug("late checkpoint read error: %r", exc)


_late_errors_quieted = False


def quiet_late_read_errors() -> None:
    """Routes the stray failures of a damaged checkpoint's reads (memjax reports the damage
    itself, in one line) to the debug log instead of stderr. They arrive through
    four doors depending on the thread and the moment: asyncio's log of an unretrieved task
    exception, the unraisable-exception hook, the thread hook and the process hook. Every other
    record and exception passes as before. Installed once per process."""
    global _late_errors_quieted
    if _late_errors_quieted:
        return
    _late_errors_quieted = True
    logging.getLogger("asyncio").addFilter(_LateReadErrorFilter())
    sys.unraisablehook = _unless_late(sys.unraisablehook, lambda info: info.exc_value)
    threading.excepthook = _unless_late(threading.excepthook, lambda args: args.exc_value)
    sys.excepthook = _unless_late(sys.excepthook, lambda kind, value, tb: value)


def _unless_late(previous, exception_of):
    """A hook that logs a late read error at debug level and hands anything else to
    `previous`; `exception_of` picks the exception out of the hook's arguments."""

    def hook(*args):
        exc = exception_of(*args)
        if _is_late_read_error(exc):
            _debug_late(exc)
        else:
            previous(*args)

    return hook


__all__ = ["LibraryFilter", "from_memjax", "libraries_silenced", "quiet_late_read_errors"]
