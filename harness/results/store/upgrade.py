"""Format-version upgrades of result rows (the asv approach).

Every row of ``runs.csv`` carries its ``format_version``. On read, a row older than
:data:`~harness.results.store.schema.FORMAT_VERSION` is passed through one step per version (``STEPS[v]`` turns a raw
version-``v`` row, a ``dict`` of column name to CSV text, into a version ``v + 1`` row), then validated against the
current schema. A row newer than this harness knows is refused: silently dropping columns a newer harness wrote
would lose data. The next write of a table stores every row in the current format.

To change the format: bump ``FORMAT_VERSION``, change the models in :mod:`harness.results.store.schema`, add
``STEPS[old] = function`` here, and list columns the new format drops in ``RETIRED_COLUMNS`` (so headers of old
tables are not mistaken for unknown columns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from harness.errors import ResultsError
from harness.results.store.schema import FORMAT_VERSION

RawRow = dict[str, str]
Step = Callable[[RawRow], RawRow]


def _v1_to_v2(raw: RawRow) -> RawRow:
    """Format 2 adds ``benchmark_version`` and ``benchmark_sha256``. A format-1 row's spec had version 1 (the
    default, and the version of every spec while format 1 was written); its folder hash was not recorded."""
    return {**raw, "format_version": "2", "benchmark_version": "1", "benchmark_sha256": ""}


STEPS: dict[int, Step] = {1: _v1_to_v2}
"""``STEPS[v]`` upgrades a raw row from format ``v`` to ``v + 1``."""

RETIRED_COLUMNS: frozenset[str] = frozenset()
"""Columns of older formats that the current format no longer has."""

MIN_FORMAT_VERSION = 1
"""The oldest format any harness wrote."""


def row_version(raw: Mapping[str, str], where: str) -> int:
    """The ``format_version`` of a raw row; ``where`` (``file:line``) names the row in errors."""
    text = raw.get("format_version", "")
    try:
        return int(text)
    except ValueError:
        raise ResultsError(f"{where}: format_version: not an integer: {text!r}") from None


def upgrade_row(
    raw: RawRow,
    where: str,
    *,
    steps: Mapping[int, Step] | None = None,
    current: int = FORMAT_VERSION,
    minimum: int = MIN_FORMAT_VERSION,
) -> RawRow:
    """Bring a raw row to format ``current``; refuse newer or unknown versions with a one-line error.

    ``steps``, ``current`` and ``minimum`` default to this harness's; tests pass their own to exercise the chain.
    """
    chain = STEPS if steps is None else steps
    version = row_version(raw, where)
    if version > current:
        raise ResultsError(
            f"{where}: written by a newer harness (format_version {version}; this harness reads up to {current}); "
            "update the harness"
        )
    if version < minimum:
        raise ResultsError(f"{where}: unknown format_version {version} (the oldest format is {minimum})")
    if version == current:
        return raw
    row = dict(raw)
    while version < current:
        step = chain.get(version)
        if step is None:
            raise ResultsError(f"{where}: no upgrade step from format_version {version} to {version + 1}")
        row = step(row)
        version += 1
        row["format_version"] = str(version)
    return row
