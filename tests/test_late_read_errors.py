"""A damaged checkpoint's stray read failures (tensorstore errors, a closed asyncio loop) go to
the debug log; every other exception still reaches the hook it had before."""

import logging
import sys
import threading
import types

import pytest

from memjax import log_filter


@pytest.fixture
def hooks_restored():
    saved = (
        sys.unraisablehook,
        threading.excepthook,
        sys.excepthook,
        log_filter._late_errors_quieted,
    )
    asyncio_filters = list(logging.getLogger("asyncio").filters)
    yield
    sys.unraisablehook, threading.excepthook, sys.excepthook = saved[:3]
    log_filter._late_errors_quieted = saved[3]
    logging.getLogger("asyncio").filters[:] = asyncio_filters


def test_late_read_errors_are_quiet_and_others_pass(hooks_restored):
    seen = []
    sys.unraisablehook = lambda info: seen.append(("unraisable", info.exc_value))
    threading.excepthook = lambda args: seen.append(("thread", args.exc_value))
    log_filter._late_errors_quieted = False
    log_filter.quiet_late_read_errors()
    log_filter.quiet_late_read_errors()  # idempotent: no second layer of hooks

    closed = RuntimeError("Event loop is closed")
    other = RuntimeError("a real bug")
    sys.unraisablehook(types.SimpleNamespace(exc_value=closed))
    threading.excepthook(types.SimpleNamespace(exc_value=closed))
    sys.unraisablehook(types.SimpleNamespace(exc_value=other))
    threading.excepthook(types.SimpleNamespace(exc_value=other))
    assert seen == [("unraisable", other), ("thread", other)]

    record = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception", (), None)
    read_error = Exception("Encountered error while reading array index. See full TensorStore")
    record.exc_info = (Exception, read_error, None)
    asyncio_logger = logging.getLogger("asyncio")
    assert not asyncio_logger.filter(record)
    record.exc_info = (RuntimeError, other, None)
    assert asyncio_logger.filter(record)
