"""Read and validate result tables from a :class:`~harness.results.store.tree.Tree` (folder or git revision).

Reading cost is kept proportional to what is asked: ``runs.csv`` (one small file per benchmark) is always read
whole and checked against its sidecar checksum; outcome files are read only for the runs asked for, all at once
(one ``git cat-file`` process at a revision), and each is checked against ``files.sha256``, as is every manifest.

Tables committed before ``files.sha256`` existed have only the runs table's sidecar: at a git revision
(``legacy_ok``) their outcome and manifest files are read unchecked (git's own object hashes still vouch for the
committed bytes); in the working tree a missing ``files.sha256`` is an error until ``harness results --rehash``.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import ResultsError
from harness.results.store import layout
from harness.results.store.checksums import REHASH_HINT, FileSums
from harness.results.store.codec import (
    ChecksumError,
    OutcomeRecords,
    decode_manifest,
    decode_outcomes,
    decode_runs,
    verify_checksum,
)
from harness.results.store.manifest import Manifest
from harness.results.store.schema import RunRow, TaskOutcome
from harness.results.store.tree import Tree


class TableReader:
    """Validated access to the tables of one store snapshot."""

    def __init__(self, tree: Tree, *, cache: bool = False, legacy_ok: bool = False) -> None:
        """``cache`` keeps parsed runs tables: use it only for snapshots that do not change (git revisions).

        ``legacy_ok`` reads outcome and manifest files unchecked when the benchmark has no ``files.sha256``.
        """
        self.tree = tree
        self.legacy_ok = legacy_ok
        self._cache: dict[str, list[RunRow]] | None = {} if cache else None
        self._sums_cache: dict[str, FileSums | None] = {}

    def file_sums(self, benchmark: str, data: bytes | None) -> FileSums | None:
        """Parse ``files.sha256`` bytes (``None`` when absent and ``legacy_ok``; else absent is an error)."""
        where = self.tree.where(layout.file_sums_path(benchmark))
        if data is None:
            if self.legacy_ok:
                return None
            raise ChecksumError(f"{where}: missing, so outcome and manifest files are unchecked; {REHASH_HINT}")
        return FileSums.decode(data, where)

    def _sums(self, benchmark: str, data: bytes | None) -> FileSums | None:
        if self._cache is None:
            return self.file_sums(benchmark, data)
        if benchmark not in self._sums_cache:
            self._sums_cache[benchmark] = self.file_sums(benchmark, data)
        return self._sums_cache[benchmark]

    def _checked(self, benchmark: str, path: str, data: bytes, sums: FileSums | None) -> None:
        if sums is not None:
            where = self.tree.where(layout.file_sums_path(benchmark))
            sums.check(layout.in_benchmark(benchmark, path), data, self.tree.where(path), where)

    def benchmarks(self) -> list[str]:
        """Benchmark folders of the store (those without a runs table yield no runs)."""
        return self.tree.folders()

    def parse_runs(self, benchmark: str, data: bytes | None, sidecar: bytes | None) -> list[RunRow]:
        """Check ``runs.csv`` bytes against the sidecar and decode them (``[]`` when the table does not exist)."""
        if data is None:
            if sidecar is not None:
                raise ResultsError(
                    f"{self.tree.where(layout.runs_path(benchmark))}: missing, but its checksum file exists"
                )
            return []
        where = self.tree.where(layout.runs_path(benchmark))
        verify_checksum(data, sidecar, where, self.tree.where(layout.checksum_path(benchmark)))
        return decode_runs(data, where, benchmark)

    def runs_table(self, benchmark: str) -> list[RunRow]:
        """All rows of one benchmark's ``runs.csv``, in file order."""
        if self._cache is not None and benchmark in self._cache:
            return self._cache[benchmark]
        files = self.tree.read_many([layout.runs_path(benchmark), layout.checksum_path(benchmark)])
        rows = self.parse_runs(benchmark, files[layout.runs_path(benchmark)], files[layout.checksum_path(benchmark)])
        if self._cache is not None:
            self._cache[benchmark] = rows
        return rows

    def runs(self, benchmark: str | None = None) -> list[RunRow]:
        """Rows of one benchmark, or of every benchmark (sorted by benchmark, then file order)."""
        names = [benchmark] if benchmark is not None else self.benchmarks()
        return [row for name in names for row in self.runs_table(name)]

    def outcome_records(self, benchmark: str, run_ids: Sequence[str]) -> OutcomeRecords:
        """Outcomes of several runs of one benchmark, concatenated; a missing file is an error."""
        paths = {run_id: layout.outcomes_path(benchmark, run_id) for run_id in run_ids}
        sums_path = layout.file_sums_path(benchmark)
        files = self.tree.read_many([*paths.values(), sums_path])
        sums = self._sums(benchmark, files[sums_path])
        out = OutcomeRecords()
        for run_id, path in paths.items():
            data = files[path]
            if data is None:
                raise ResultsError(f"{self.tree.where(path)}: outcomes of run {run_id!r} not found")
            self._checked(benchmark, path, data, sums)
            out.extend(decode_outcomes(data, self.tree.where(path), run_id))
        return out

    def outcomes(self, benchmark: str, run_id: str) -> list[TaskOutcome]:
        """Per-sample outcomes of one run."""
        return self.outcome_records(benchmark, [run_id]).models()

    def manifest(self, benchmark: str, run_id: str) -> Manifest:
        """The provenance manifest of one run."""
        path, sums_path = layout.manifest_path(benchmark, run_id), layout.file_sums_path(benchmark)
        files = self.tree.read_many([path, sums_path])
        data = files[path]
        if data is None:
            raise ResultsError(f"{self.tree.where(path)}: manifest of run {run_id!r} not found")
        self._checked(benchmark, path, data, self._sums(benchmark, files[sums_path]))
        return decode_manifest(data, self.tree.where(path))
