"""``harness results --verify``: check every file of a result store against its checksums and its schema.

For each benchmark: ``runs.csv`` against ``runs.csv.sha256`` and the row schema; each row's outcomes and manifest
file against ``files.sha256`` and their schemas; files in ``outcomes/`` or ``manifests/`` that no row names, and
``files.sha256`` entries whose file is gone. Every problem is one line naming the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ResultsError
from harness.results.store import layout
from harness.results.store.checksums import FileSums
from harness.results.store.codec import decode_manifest, decode_outcomes, decode_runs, verify_checksum
from harness.results.store.schema import RunRow


@dataclass
class VerifyReport:
    """What a verification found."""

    files: int = 0
    runs: int = 0
    problems: list[str] = field(default_factory=list)


def _try(report: VerifyReport, check: Callable[[], object]) -> bool:
    try:
        check()
    except ResultsError as exc:
        report.problems.append(str(exc))
        return False
    return True


def _listed(folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {f"{folder.name}/{p.name}" for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}


def _check_file(
    report: VerifyReport, root: Path, benchmark: str, path: str, run_id: str, sums: FileSums | None
) -> None:
    """One outcome or manifest file: present, matching ``files.sha256`` and valid."""
    full = root / path
    if not full.exists():
        report.problems.append(f"{full}: missing (run {run_id!r} of {root / layout.runs_path(benchmark)})")
        return
    content = full.read_bytes()
    report.files += 1
    relative = layout.in_benchmark(benchmark, path)
    sums_where = str(root / layout.file_sums_path(benchmark))
    if sums is not None:
        _try(report, lambda: sums.check(relative, content, str(full), sums_where))
    if path.endswith(".csv"):
        _try(report, lambda: decode_outcomes(content, str(full), run_id))
    else:
        _try(report, lambda: decode_manifest(content, str(full)))


def verify_benchmark(root: Path, benchmark: str, report: VerifyReport) -> None:
    """Check one benchmark's folder, adding problems to ``report``."""
    folder = root / benchmark
    table, sidecar = root / layout.runs_path(benchmark), root / layout.checksum_path(benchmark)
    sums_file = root / layout.file_sums_path(benchmark)
    if not table.exists():
        if sidecar.exists():
            report.problems.append(f"{table}: missing, but its checksum file exists")
        return
    data = table.read_bytes()
    report.files += 1
    if not _try(
        report,
        lambda: verify_checksum(data, sidecar.read_bytes() if sidecar.exists() else None, str(table), str(sidecar)),
    ):
        return
    rows: list[RunRow] = []
    if not _try(report, lambda: rows.extend(decode_runs(data, str(table), benchmark))):
        return
    report.runs += len(rows)
    sums = FileSums()
    if not sums_file.exists():
        report.problems.append(
            f"{sums_file}: missing, so outcome and manifest files are unchecked; "
            "check them, then run `harness results --rehash`"
        )
    elif not _try(report, lambda: sums.entries.update(FileSums.decode(sums_file.read_bytes(), str(sums_file)).entries)):
        return
    named: set[str] = set()
    for row in rows:
        for path in (layout.outcomes_path(benchmark, row.run_id), layout.manifest_path(benchmark, row.run_id)):
            named.add(layout.in_benchmark(benchmark, path))
            _check_file(report, root, benchmark, path, row.run_id, sums if sums_file.exists() else None)
    for relative in sorted((_listed(folder / layout.OUTCOMES_DIR) | _listed(folder / layout.MANIFESTS_DIR)) - named):
        report.problems.append(f"{folder / relative}: no run of {table} names this file")
    for relative in sorted(set(sums.entries) - named):
        if not (folder / relative).exists():
            report.problems.append(f"{sums_file}: lists {relative}, which does not exist")


def verify_store(root: Path, benchmarks: list[str]) -> VerifyReport:
    """Check the named benchmarks of the store at ``root``."""
    report = VerifyReport()
    for name in benchmarks:
        verify_benchmark(root, name, report)
    return report


def provenance_warnings(root: Path, rows: list[RunRow]) -> list[str]:
    """Rows that ``harness reproduce`` cannot re-run: measured from a checkout with uncommitted changes, or at a
    commit this repository does not have. Warnings, not errors: the rows themselves are intact."""
    from harness.results.store import git

    try:
        top, _ = git.repo_location(root)
    except ResultsError:
        return [f"{root}: not in a git repository; the rows' commits cannot be checked"]
    out = []
    for row in rows:
        where = f"{row.benchmark}/{row.run_id}"
        if row.git_dirty:
            commit = row.git_commit[:12]
            out.append(f"{where}: measured from a checkout with uncommitted changes ({commit}): no commit holds it")
            continue
        try:
            git.resolve_commit(top, row.git_commit)
        except ResultsError:
            out.append(f"{where}: its commit {row.git_commit[:12]} is not in the repository at {top}")
    return out
