"""Errors a user can cause (config, data, paths, checkpoints), as opposed to programming errors.

A `UserError`'s message names the file, field or value at fault; the launcher prints it as one
line (`memjax.launch: error: <message>`) without a traceback. Anything else keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Base class: the message says which file, field or value is wrong and why."""


class ConfigError(UserError, ValueError):
    """A config field has a value outside what the job accepts."""


class DataError(UserError, ValueError):
    """A data or artefact file is missing, empty or malformed."""


class CheckpointError(UserError, RuntimeError):
    """A checkpoint cannot be restored into this run."""


__all__ = ["UserError", "ConfigError", "DataError", "CheckpointError"]
