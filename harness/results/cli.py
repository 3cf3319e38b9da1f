"""The ``results``, ``compare`` and ``report`` commands of the ``harness`` CLI (``power``, which reads the spec, is
in :mod:`harness.run.cli`).

Only argument parsing lives here; the work is done by :class:`~harness.results.compare.compare.CompareCommand`,
:class:`~harness.results.report.report.ReportCommand` and :class:`~harness.results.store.store.ResultStore`. User
errors are raised as :class:`~harness.errors.ResultsError` for the main CLI to print as one line (exit code 2).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from harness.errors import ResultsError
from harness.results.compare import render
from harness.results.store.store import ResultStore


class OutputFormat(StrEnum):
    """How a command prints its result."""

    table = "table"
    wide = "wide"
    md = "md"
    json = "json"


BenchmarkOpt = Annotated[str | None, typer.Option("--benchmark", "-b", help="Only this benchmark.")]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="table (one line per row below 120 columns), wide, md (Markdown) or json."),
]


def results_command(
    benchmark: BenchmarkOpt = None,
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="Only this profile.")] = None,
    commit: Annotated[str | None, typer.Option("--commit", "-c", help="Only runs of this git commit (prefix).")] = None,
    fmt: FormatOpt = OutputFormat.table,
    rehash: Annotated[
        bool,
        typer.Option(
            "--rehash",
            help="Validate runs.csv and its outcome and manifest files and accept them as they are (after a "
            "deliberate hand edit, e.g. resolving a merge).",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Check every file of the result tables against its checksum and schema."),
    ] = False,
) -> None:
    """List recorded runs (validated against the schema and checksums)."""
    store = ResultStore()
    names = [benchmark] if benchmark else store.benchmarks()
    if rehash and verify:
        raise ResultsError("--rehash and --verify: choose one")
    if rehash:
        for name in names:
            digest = store.rehash(name)
            typer.echo(f"{store.root / name / 'runs.csv'}: accepted with its runs' files, sha256 {digest}")
        return
    if verify:
        from harness.results.store.verify import provenance_warnings, verify_store

        report = verify_store(store.root, names)
        for problem in report.problems:
            typer.echo(f"error: {problem}", err=True)
        if report.problems:
            raise typer.Exit(2)
        warnings = provenance_warnings(store.root, [r for name in names for r in store.runs(name)])
        for warning in warnings:
            typer.echo(f"warning: {warning}", err=True)
        typer.echo(
            f"ok: {report.runs} runs, {report.files} files match their checksums ({store.root})"
            + (f"; {len(warnings)} runs cannot be reproduced (warnings above)" if warnings else "")
        )
        return
    rows = store.runs(benchmark)
    if profile is not None:
        rows = [r for r in rows if r.profile == profile]
    if commit is not None:
        rows = [r for r in rows if r.git_commit.startswith(commit)]
    render.print_runs(rows, fmt.value)


def compare_command(
    a: Annotated[
        str,
        typer.Argument(
            help="Side A: REV (the results table committed at git revision REV: its latest measured runs), "
            "code:REV (the working tree's runs measured with the code at REV, even if their rows were committed "
            "later), run:<id>[,<id>...][@before|@after] (one phase of each run), or . / worktree."
        ),
    ],
    b: Annotated[str, typer.Argument(help="Side B: same forms as A.")],
    benchmark: BenchmarkOpt = None,
    fmt: FormatOpt = OutputFormat.table,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit with code 1 when B has a significant regression, or when a pair is not comparable (x: a "
            "benchmark or profile missing on one side, or its dataset or split changed).",
        ),
    ] = False,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="With --fail-on-regression: do not fail on x pairs.")
    ] = False,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level; CIs are at 1 - alpha.")] = 0.05,
    across_profiles: Annotated[
        bool,
        typer.Option(
            "--across-profiles",
            help="Pair two run: sides of one benchmark even when their profiles differ (a baseline against a tuned "
            "profile's run).",
        ),
    ] = False,
) -> None:
    """Compare pass rates of two revisions / run sets with paired tests (+ better, - worse, ~ noise, x n/a)."""
    if not 0 < alpha < 1:
        raise ResultsError(f"--alpha must be between 0 and 1, got {alpha}")
    if allow_missing and not fail_on_regression:
        raise ResultsError("--allow-missing only applies with --fail-on-regression")
    from harness.results.compare.compare import CompareCommand

    command = CompareCommand(a, b, benchmark, fmt.value, fail_on_regression, alpha, allow_missing=allow_missing)
    command.across_profiles = across_profiles
    code = command.run()
    if code:
        raise typer.Exit(code)


def report_command(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder (default artifacts/report).")] = None,
    benchmark: BenchmarkOpt = None,
    against: Annotated[
        str | None, typer.Option("--against", help="Per-task win/loss of this git revision vs the working tree.")
    ] = None,
) -> None:
    """Write report.html, report.md and PNG plots of the recorded results."""
    from harness.results.report.report import ReportCommand  # matplotlib: imported when used

    files = ReportCommand(out, benchmark, against).run()
    typer.echo(f"wrote {files.html} ({len(files.images)} plots) and {files.markdown}")


def register(app: typer.Typer) -> None:
    """Add ``results``, ``compare`` and ``report`` to the main ``harness`` app."""
    app.command("results")(results_command)
    app.command("compare")(compare_command)
    app.command("report")(report_command)
