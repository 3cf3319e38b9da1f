"""Error types shared by every stage.

A :class:`HarnessError` is a problem the user can fix (bad spec, bad hash, missing file). The CLI prints it as
one line, without a traceback, and exits with code 2. Anything else is a bug or an infrastructure failure and
keeps its traceback.
"""

from __future__ import annotations


class HarnessError(Exception):
    """A user-facing error: printed as one line, exit code 2."""

    exit_code = 2


class SpecError(HarnessError):
    """The benchmark spec is invalid: names the file and the key."""


class DataError(HarnessError):
    """A dataset could not be fetched, or its content does not match the pinned hash."""


class ModelError(HarnessError):
    """A model checkpoint could not be obtained or converted."""


class RunFailure(HarnessError):
    """The run failed for a reason other than the user's input: one line, exit code 1."""

    exit_code = 1


class ServingError(RunFailure):
    """The model server failed to start or stopped answering. Names its log file."""


class EngineError(RunFailure):
    """A training engine failed. Names its log file (and the cause, e.g. the kernel's out-of-memory killer)."""


class ResultsError(HarnessError):
    """A results table is unreadable, corrupt or cannot be written."""
