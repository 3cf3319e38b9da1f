"""What one side of a comparison is: the working tree, a git revision, or explicit run ids.

The tables are cumulative: the ``runs.csv`` committed at a revision holds every run recorded up to then. So a
revision (or the working tree) is represented, per (benchmark, profile), by its *latest measured code*: the
complete runs that share the ``git_commit`` of the most recently started complete run -- all seeds and repeats of
that commit, pooled -- restricted to the same dataset, split and task count as that run. ``run:<id>,<id>`` picks
runs explicitly (looked up in the working tree) and pools them per (benchmark, profile).

Parse a command-line word with :func:`parse_source`: ``.`` or ``worktree``, ``run:<id>[,<id>...]``, or anything
git understands as a commit (``HEAD~1``, a sha, a tag, a branch).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from harness.errors import ResultsError
from harness.paths import results_dir
from harness.results.codec import OutcomeRecords
from harness.results.reader import TableReader
from harness.results.schema import RunRow
from harness.results.store import ResultStore
from harness.results.tree import GitTree

GroupKey = tuple[str, str]
"""(benchmark, profile)"""


class RunsReader(Protocol):
    """Read access shared by :class:`ResultStore` and :class:`TableReader`."""

    def runs(self, benchmark: str | None = None) -> list[RunRow]:
        """Run rows."""
        ...

    def outcome_records(self, benchmark: str, run_ids: Sequence[str]) -> OutcomeRecords:
        """Outcomes of runs."""
        ...

    def manifest(self, benchmark: str, run_id: str) -> dict[str, Any]:
        """A run's manifest."""
        ...


def comparability_key(row: RunRow) -> tuple[str, str, int]:
    """Runs can be pooled or compared only when these agree: dataset hash, eval split, task count."""
    return row.dataset_sha256, row.eval_split, row.n_tasks


def group_runs(rows: Sequence[RunRow]) -> dict[GroupKey, list[RunRow]]:
    """Rows by (benchmark, profile), in input order."""
    groups: dict[GroupKey, list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[(row.benchmark, row.profile)].append(row)
    return dict(groups)


def latest_measured(rows: Sequence[RunRow]) -> dict[GroupKey, list[RunRow]]:
    """Per (benchmark, profile): the complete runs of the most recently measured commit (see module docstring)."""
    selected: dict[GroupKey, list[RunRow]] = {}
    for key, group in group_runs([r for r in rows if r.status == "complete"]).items():
        latest = max(group, key=lambda r: r.started)
        selected[key] = [
            r for r in group if r.git_commit == latest.git_commit and comparability_key(r) == comparability_key(latest)
        ]
    return selected


class Source(ABC):
    """One side of a comparison."""

    label: str
    reader: RunsReader

    @abstractmethod
    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """The runs representing this side, per (benchmark, profile)."""

    def runs(self, benchmark: str | None = None) -> list[RunRow]:
        """Every run row of the underlying tables."""
        return self.reader.runs(benchmark)

    def outcome_records(self, benchmark: str, run_ids: Sequence[str]) -> OutcomeRecords:
        """Outcomes of some runs of one benchmark."""
        return self.reader.outcome_records(benchmark, run_ids)

    def manifest(self, benchmark: str, run_id: str) -> dict[str, Any]:
        """A run's manifest."""
        return self.reader.manifest(benchmark, run_id)


class WorktreeSource(Source):
    """The tables in the working tree (including uncommitted runs)."""

    def __init__(self, root: Path | None = None) -> None:
        self.store = ResultStore(root)
        self.reader = self.store
        self.label = "worktree"

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """Latest measured commit per (benchmark, profile)."""
        return latest_measured(self.runs(benchmark))


class RevisionSource(Source):
    """The tables as committed at a git revision, read without checkout."""

    def __init__(self, rev: str, root: Path | None = None) -> None:
        tree = GitTree(Path(root) if root is not None else results_dir(), rev)
        self.commit = tree.commit
        self.reader = TableReader(tree, cache=True)
        self.label = rev if rev.startswith(tree.commit[:7]) else f"{rev} ({tree.commit[:10]})"

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """Latest measured commit per (benchmark, profile)."""
        return latest_measured(self.runs(benchmark))


class RunIdsSource(Source):
    """Explicit runs of the working tree, pooled per (benchmark, profile)."""

    def __init__(self, run_ids: Sequence[str], root: Path | None = None) -> None:
        if not run_ids:
            raise ResultsError("run: needs at least one run id (run:<id>[,<id>...])")
        self.run_ids = list(dict.fromkeys(run_ids))
        self.store = ResultStore(root)
        self.reader = self.store
        self.label = "run:" + ",".join(self.run_ids)

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """The named runs; an unknown or ambiguous id, or runs that cannot be pooled, are errors."""
        by_id: dict[str, list[RunRow]] = defaultdict(list)
        for row in self.runs(benchmark):
            by_id[row.run_id].append(row)
        chosen: list[RunRow] = []
        for run_id in self.run_ids:
            found = by_id.get(run_id, [])
            if not found:
                scope = f"benchmark {benchmark!r}" if benchmark else "any benchmark"
                raise ResultsError(f"run {run_id!r} not found in {scope} under {self.store.root}")
            if len(found) > 1:
                names = ", ".join(r.benchmark for r in found)
                raise ResultsError(f"run {run_id!r} exists in several benchmarks ({names}); pass --benchmark")
            chosen.append(found[0])
        groups = group_runs(chosen)
        for (bench, profile), rows in groups.items():
            keys = {comparability_key(r) for r in rows}
            if len(keys) > 1:
                raise ResultsError(
                    f"runs of {bench}/{profile} cannot be pooled: they differ in dataset, eval split or task count "
                    f"({', '.join(r.run_id for r in rows)})"
                )
        return groups


def parse_source(text: str, root: Path | None = None) -> Source:
    """A source from its command-line spelling (see module docstring)."""
    text = text.strip()
    if text in (".", "worktree"):
        return WorktreeSource(root)
    if text.startswith("run:"):
        return RunIdsSource([part.strip() for part in text[4:].split(",") if part.strip()], root)
    return RevisionSource(text, root)
