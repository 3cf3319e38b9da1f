"""What one side of a comparison is: the working tree, a git revision, or explicit run ids.

The tables are cumulative: the ``runs.csv`` committed at a revision holds every run recorded up to then. So a
revision (or the working tree) is represented, per (benchmark, profile), by its *latest measured code*: the
complete runs that share the ``git_commit`` of the most recently started complete run -- all seeds and repeats of
that commit, pooled -- restricted to the same dataset, split and task count as that run. ``run:<id>,<id>`` picks
runs explicitly (looked up in the working tree) and pools them per (benchmark, profile).

``code:<rev>`` compares the *code* at a revision instead of the *table* at it: the complete runs, in the working
tree's tables, that were measured with the commit ``rev`` names (a clean checkout of it), however much later
their rows were committed. A bare revision keeps the table-at-revision meaning.

Parse a command-line word with :func:`parse_source`: ``.`` or ``worktree``, ``run:<id>[,<id>...]``,
``code:<rev>``, or anything git understands as a commit (``HEAD~1``, a sha, a tag, a branch). A run list may name
the phase whose outcomes stand for it, ``run:<id>@before`` or ``run:<id>@after`` (default: each run's final phase),
so the phases of one run compare with each other: ``harness compare run:<id>@before run:<id>@after``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

from harness.errors import ResultsError
from harness.paths import results_dir
from harness.results.store import git
from harness.results.store.codec import OutcomeRecords
from harness.results.store.manifest import Manifest
from harness.results.store.reader import TableReader
from harness.results.store.schema import RunRow
from harness.results.store.store import ResultStore
from harness.results.store.tree import GitTree

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

    def manifest(self, benchmark: str, run_id: str) -> Manifest:
        """A run's manifest."""
        ...


def comparability_key(row: RunRow) -> tuple[str, str, int, int]:
    """Runs can be pooled or compared only when these agree: dataset hash, eval split, task count, benchmark
    version (results are keyed by benchmark version, as in asv)."""
    return row.dataset_sha256, row.eval_split, row.n_tasks, row.benchmark_version


def group_runs(rows: Sequence[RunRow]) -> dict[GroupKey, list[RunRow]]:
    """Rows by (benchmark, profile), in input order."""
    groups: dict[GroupKey, list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[(row.benchmark, row.profile)].append(row)
    return dict(groups)


REPRODUCTION_NOTE = "reproduces "
"""Note prefix of a row written by ``harness reproduce``."""


def latest_measured(rows: Sequence[RunRow]) -> dict[GroupKey, list[RunRow]]:
    """Per (benchmark, profile): the complete runs of the most recently measured commit (see module docstring).

    Rows of ``harness reproduce`` are left out: they repeat a run that is already there (on CPU bit for bit), so
    pooling them would count the same evidence twice. Name them with ``run:`` to compare them.
    """
    selected: dict[GroupKey, list[RunRow]] = {}
    kept = [r for r in rows if r.status == "complete" and not r.note.startswith(REPRODUCTION_NOTE)]
    for key, group in group_runs(kept).items():
        latest = max(group, key=lambda r: r.started)
        selected[key] = [
            r for r in group if r.git_commit == latest.git_commit and comparability_key(r) == comparability_key(latest)
        ]
    return selected


Phase = Literal["before", "after"]


class Source(ABC):
    """One side of a comparison."""

    label: str
    reader: RunsReader
    phase: Phase | None = None
    """The phase whose outcomes stand for each run (None: each run's final phase)."""
    explicit: bool = False
    """Runs named by id: two such sides are paired even when their profiles differ."""

    @abstractmethod
    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """The runs representing this side, per (benchmark, profile)."""

    def runs(self, benchmark: str | None = None) -> list[RunRow]:
        """Every run row of the underlying tables."""
        return self.reader.runs(benchmark)

    def outcome_records(self, benchmark: str, run_ids: Sequence[str]) -> OutcomeRecords:
        """Outcomes of some runs of one benchmark."""
        return self.reader.outcome_records(benchmark, run_ids)

    def manifest(self, benchmark: str, run_id: str) -> Manifest:
        """A run's manifest."""
        return self.reader.manifest(benchmark, run_id)

    def describe(self) -> str:
        """Which runs this side stands for, in words (used in messages)."""
        return self.label

    def missing(self, key: GroupKey, side: str) -> str:
        """Why this side has no runs of ``key``: which source was used and what it has instead."""
        bench, profile = key
        others = sorted(p for b, p in self.groups(bench) if p != profile)
        have = f"only {bench} profiles {', '.join(others)}" if others else f"no complete runs of {bench}"
        return f"no complete runs of {bench}/{profile} on side {side} ({self.describe()}), which has {have}"


class WorktreeSource(Source):
    """The tables in the working tree (including uncommitted runs)."""

    def __init__(self, root: Path | None = None) -> None:
        self.store = ResultStore(root)
        self.reader = self.store
        self.label = "worktree"

    def describe(self) -> str:
        """The working tree's tables."""
        return "table in the working tree"

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """Latest measured commit per (benchmark, profile)."""
        return latest_measured(self.runs(benchmark))


class RevisionSource(Source):
    """The tables as committed at a git revision, read without checkout."""

    def __init__(self, rev: str, root: Path | None = None) -> None:
        tree = GitTree(Path(root) if root is not None else results_dir(), rev)
        self.commit = tree.commit
        self.reader = TableReader(tree, cache=True, legacy_ok=True)
        self.label = rev if rev.startswith(tree.commit[:7]) else f"{rev} ({tree.commit[:10]})"
        self.root = Path(root) if root is not None else results_dir()

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """Latest measured commit per (benchmark, profile)."""
        return latest_measured(self.runs(benchmark))

    def describe(self) -> str:
        """The table committed at the revision."""
        return f"table at {self.commit[:10]}"

    def missing(self, key: GroupKey, side: str) -> str:
        """Also say when the working tree has runs of the code at this revision (``code:<rev>`` finds them)."""
        text = super().missing(key, side)
        bench, profile = key
        measured = [
            r
            for r in ResultStore(self.root).runs(bench)
            if r.profile == profile and r.status == "complete" and r.git_commit == self.commit and not r.git_dirty
        ]
        if measured:
            text += f"; the working tree has {len(measured)} run(s) of the code at it: try code:{self.commit[:10]}"
        return text


class CodeSource(Source):
    """The working tree's complete runs measured with the code of one commit (clean checkouts only)."""

    def __init__(self, rev: str, root: Path | None = None) -> None:
        self.store = ResultStore(root)
        self.reader = self.store
        top, _ = git.repo_location(self.store.root)
        self.commit = git.resolve_commit(top, rev)
        self.label = f"code:{rev}" if rev.startswith(self.commit[:7]) else f"code:{rev} ({self.commit[:10]})"

    def groups(self, benchmark: str | None = None) -> dict[GroupKey, list[RunRow]]:
        """Per (benchmark, profile): the runs of this commit, restricted to the data of the latest of them."""
        rows = [r for r in self.runs(benchmark) if r.git_commit == self.commit and not r.git_dirty]
        return latest_measured(rows)

    def describe(self) -> str:
        """The runs of this commit's code in the working tree's tables."""
        return f"runs of the code at {self.commit[:10]}, from the working tree's tables"


class RunIdsSource(Source):
    """Explicit runs of the working tree, pooled per (benchmark, profile); optionally one phase of each."""

    explicit = True

    def __init__(self, run_ids: Sequence[str], root: Path | None = None, phase: Phase | None = None) -> None:
        if not run_ids:
            raise ResultsError("run: needs at least one run id (run:<id>[,<id>...][@before|@after])")
        self.run_ids = list(dict.fromkeys(run_ids))
        self.store = ResultStore(root)
        self.reader = self.store
        self.phase = phase
        self.label = "run:" + ",".join(self.run_ids) + (f"@{phase}" if phase else "")

    def describe(self) -> str:
        """The named runs."""
        return f"runs {', '.join(self.run_ids)}"

    def missing(self, key: GroupKey, side: str) -> str:
        """Which benchmark/profile the named runs are of instead."""
        have = ", ".join(f"{b}/{p}" for b, p in sorted(self.groups()))
        return f"no runs of {key[0]}/{key[1]} on side {side} ({self.describe()}); those runs are of {have}"

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
                    f"runs of {bench}/{profile} cannot be pooled: they differ in dataset, eval split, task count or "
                    f"benchmark version ({', '.join(r.run_id for r in rows)})"
                )
        return groups


def parse_source(text: str, root: Path | None = None) -> Source:
    """A source from its command-line spelling (see module docstring)."""
    text = text.strip()
    if text in (".", "worktree"):
        return WorktreeSource(root)
    if text.startswith("run:"):
        ids, at, phase = text[4:].partition("@")
        if at and phase not in ("before", "after"):
            raise ResultsError(f"{text}: the phase after @ is before or after, not {phase!r}")
        chosen: Phase | None = "before" if phase == "before" else "after" if phase == "after" else None
        return RunIdsSource([part.strip() for part in ids.split(",") if part.strip()], root, chosen)
    if text.startswith("code:"):
        if not text[5:].strip():
            raise ResultsError("code: needs a git revision (code:<rev>)")
        return CodeSource(text[5:].strip(), root)
    return RevisionSource(text, root)
