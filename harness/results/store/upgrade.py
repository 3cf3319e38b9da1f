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
from harness.records import Versions
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


def upgrade_row(
    raw: RawRow,
    where: str,
    *,
    steps: Mapping[int, Step] | None = None,
    current: int = FORMAT_VERSION,
    minimum: int = MIN_FORMAT_VERSION,
) -> RawRow:
    """Bring a raw row to format ``current``; refuse newer or unknown versions with a one-line error
    (:class:`harness.records.Versions`, as every versioned record is read).

    ``steps``, ``current`` and ``minimum`` default to this harness's; tests pass their own to exercise the chain.
    """
    chain = STEPS if steps is None else steps
    versions = Versions("", current, chain, key="format_version", minimum=minimum, error=ResultsError)
    return versions.upgrade(raw, where)
