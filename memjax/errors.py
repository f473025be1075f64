"""Errors a user can cause and fix: bad data files, stale cached artefacts.

A `UserError`'s message is complete on its own (it names the file or field and what is wrong),
so the launcher can print it as one line without a traceback. Programming errors are never
`UserError`s and keep their traceback. The subclasses are also `ValueError`s, so callers that
catch ValueError keep working.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix: the message names the file, field or value."""


class DataFileError(UserError, ValueError):
    """A data, bank or index file that is missing a part, malformed or inconsistent."""


class StaleArtefactError(UserError, ValueError):
    """A cached artefact built from other inputs than the ones asked for now."""
