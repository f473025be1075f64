"""Errors a user can cause and fix (config, data, paths, checkpoints, stale cached artefacts),
as opposed to programming errors.

A `UserError`'s message is complete on its own (it names the file, field or value and what is
wrong), so the launcher prints it as one line (`memjax.launch: error: <message>`) without a
traceback. Programming errors are never `UserError`s and keep their traceback. Most subclasses
are also `ValueError`s, so callers that catch ValueError keep working.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix: the message names the file, field or value."""


class ConfigError(UserError, ValueError):
    """A config field has a value outside what the job accepts."""


class DataError(UserError, ValueError):
    """A data or artefact file is missing, empty or malformed."""


class DataFileError(DataError):
    """A data, bank or index file that is missing a part, malformed or inconsistent."""


class StaleArtefactError(DataError):
    """A cached artefact built from other inputs than the ones asked for now."""


class CheckpointError(UserError, RuntimeError):
    """A checkpoint cannot be restored into this run."""


__all__ = [
    "UserError",
    "ConfigError",
    "DataError",
    "DataFileError",
    "StaleArtefactError",
    "CheckpointError",
]
