"""Versioned result tables, cross-commit comparison with honest statistics, and reports.

Modules, one job each:

* :mod:`~harness.results.schema` -- :class:`RunRow` and :class:`TaskOutcome` (typed, documented fields)
* :mod:`~harness.results.upgrade` -- format-version upgrade steps; newer formats are refused
* :mod:`~harness.results.codec` -- CSV/JSON bytes <-> validated rows; checksums
* :mod:`~harness.results.checksums` -- ``files.sha256``: checksums of every outcome and manifest file
* :mod:`~harness.results.verify` -- ``harness results --verify``: every file against checksums and schema
* :mod:`~harness.results.atomic` -- crash-safe file replacement
* :mod:`~harness.results.layout` -- file names inside ``results/``
* :mod:`~harness.results.tree` / :mod:`~harness.results.git` -- files of the working tree or of a git revision
* :mod:`~harness.results.reader` -- validated reading of one snapshot
* :mod:`~harness.results.store` -- :class:`ResultStore`: locked, atomic appends and updates
* :mod:`~harness.results.sources` -- comparison sides: working tree, table at a revision, code at a revision,
  run ids
* :mod:`~harness.results.aggregate` -- pooling outcomes into per-task counts
* :mod:`~harness.results.stats` -- Wilson / clustered intervals, McNemar, sign-flip, pass^k
* :mod:`~harness.results.summary` -- the one pass rate / interval / pass^k path (rows, manifests, compare)
* :mod:`~harness.results.paired` -- B - A over paired tasks: the test and the interval that inverts it
* :mod:`~harness.results.compare` -- :func:`compare` and :class:`CompareCommand`
* :mod:`~harness.results.agreement` -- whether a reproduced run agrees with the original
* :mod:`~harness.results.render` -- table / Markdown / JSON output
* :mod:`~harness.results.plots`, :mod:`~harness.results.document`, :mod:`~harness.results.report` -- the report
* :mod:`~harness.results.cli` -- ``harness results | compare | report``

Importing this package is light (pydantic, filelock); the statistics and plotting names load on first use. The
``compare`` function is imported from its module (``from harness.results.compare import compare``): as a package
attribute its name would collide with the submodule's.
"""

from __future__ import annotations

import importlib
from typing import Any

from harness.results.schema import FORMAT_VERSION, RunRow, TaskOutcome, packages_string, utc_now_iso
from harness.results.store import ResultStore

_LAZY = {
    "Comparison": "harness.results.compare",
    "CompareCommand": "harness.results.compare",
    "Source": "harness.results.sources",
    "parse_source": "harness.results.sources",
    "ReportCommand": "harness.results.report",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.results' has no attribute {name!r}")


__all__ = [
    "FORMAT_VERSION",
    "CompareCommand",
    "Comparison",
    "ReportCommand",
    "ResultStore",
    "RunRow",
    "Source",
    "TaskOutcome",
    "packages_string",
    "parse_source",
    "utc_now_iso",
]
