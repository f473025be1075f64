"""Errors a user causes and can fix: a bad config value, data file, or checkpoint.

Each message starts with the file, field or path it is about. `memjax.launch` prints these as
one line (`memjax.launch: error: <message>`) and exits with status 2; any other exception is a
programming error and keeps its traceback.
"""


class UserError(Exception):
    """Bad input from the user; the message names the file, field or value."""


class ConfigError(UserError):
    """A config field or command-line flag has a bad value."""


class DataError(UserError):
    """A data file is missing, unreadable or malformed."""


class CheckpointError(UserError):
    """A checkpoint or model path is missing, damaged, or does not fit the run."""


__all__ = ["UserError", "ConfigError", "DataError", "CheckpointError"]
