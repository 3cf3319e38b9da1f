"""Stage 8, results: versioned result tables, comparison with honest statistics, and reports.

``store/`` (the typed rows and their files: schema, format upgrades, codec, checksums, atomic writes, reading any git
revision, :class:`~harness.results.store.store.ResultStore`, the sides a comparison reads), ``stats/`` (per-task
counts, intervals and paired tests, the one summary path, reproduction agreement, seeds as units, power by
simulation), ``compare/`` (``harness compare``: pairs, marks, units, rendering), ``report/`` (``harness report``:
plots and an HTML/Markdown document), ``planning`` (what a profile can detect before it runs: ``harness power``,
the figure of ``harness validate`` and of a run), ``signal`` (the share of GRPO groups expected to differ in the
task's reward, from the recorded baseline), ``cli`` (the ``results``, ``compare``, ``report`` and ``power``
commands, in ``cli``).
"""
