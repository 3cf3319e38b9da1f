"""Stage 1, results: versioned result tables, comparison with honest statistics, and reports.

``store/`` (the typed rows and their files: schema, format upgrades, codec, checksums, atomic writes, reading any git
revision, :class:`~harness.results.store.store.ResultStore`, the sides a comparison reads), ``stats/`` (per-task
counts, intervals and paired tests, the one summary path, reproduction agreement, seeds as units, power by
simulation), ``compare/`` (``harness compare``: pairs, marks, units, rendering), ``report/`` (``harness report``:
plots and an HTML/Markdown document), ``cli`` (the ``results``, ``compare`` and ``report`` commands).

A leaf of the import graph: it uses only the shared primitives (errors, paths, ...) and itself, so every stage may
record and read results.
"""
