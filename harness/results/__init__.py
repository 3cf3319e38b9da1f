"""Versioned result tables, cross-commit comparison with honest statistics, and reports.

Modules, one job each:

* :mod:`~harness.results.schema` -- :class:`RunRow` and :class:`TaskOutcome` (typed, documented fields)
* :mod:`~harness.results.upgrade` -- format-version upgrade steps; newer formats are refused
* :mod:`~harness.results.codec` -- CSV/JSON bytes <-> validated rows; checksums
* :mod:`~harness.results.atomic` -- crash-safe file replacement
* :mod:`~harness.results.layout` -- file names inside ``results/``
* :mod:`~harness.results.tree` / :mod:`~harness.results.git` -- files of the working tree or of a git revision
* :mod:`~harness.results.reader` -- validated reading of one snapshot
* :mod:`~harness.results.store` -- :class:`ResultStore`: locked, atomic appends and updates
* :mod:`~harness.results.sources` -- comparison sides: working tree, git revision, run ids
* :mod:`~harness.results.aggregate` -- pooling outcomes into per-task counts
* :mod:`~harness.results.stats` -- Wilson / clustered intervals, paired bootstrap, McNemar, sign-flip, pass^k
* :mod:`~harness.results.compare` -- :func:`compare` and :class:`CompareCommand`
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
