"""The writable result store in the working tree: append and update runs safely across processes.

Write protocol (per benchmark, under the inter-process lock ``<benchmark>/.runs.csv.lock``):

1. read ``runs.csv`` and check it against ``runs.csv.sha256`` (a damaged table is never extended); when every
   row is in the current format the new row is appended as one more line (cost: a byte copy, no re-validation
   of old rows, which the checksum vouches for), otherwise all rows are validated, upgraded and rewritten;
2. write ``files.sha256`` listing the run's outcomes and manifest (an update lists old and new digests), then
   those files (each atomically: temp file, fsync, ``os.replace``);
3. write the checksum sidecar accepting both the old and the new table digest, then replace ``runs.csv`` with the
   new content, then write the sidecar with only the new digest.

Once the table is written, ``files.sha256`` is written again with only the new digests. A crash or error at
any step leaves a table that reads back as either the previous or the new version; step 3's
transitional sidecar is what keeps the two files consistent without a multi-file transaction. Readers take no
lock (they never write, not even a lock file); one that races a writer and sees the two files from different
steps retries (see :meth:`ResultStore._read_settled`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import filelock

from harness.errors import ResultsError
from harness.paths import results_dir
from harness.results.store import layout
from harness.results.store.atomic import atomic_write, describe_os_error, ensure_dir
from harness.results.store.checksums import FileSums
from harness.results.store.codec import (
    ChecksumError,
    OutcomeRecords,
    decode_manifest,
    decode_outcomes,
    decode_runs,
    encode_checksum,
    encode_manifest,
    encode_outcomes,
    encode_runs,
    scan_run_ids,
    sha256_hex,
    verify_checksum,
)
from harness.results.store.manifest import Manifest
from harness.results.store.reader import TableReader
from harness.results.store.schema import RunRow, TaskOutcome
from harness.results.store.tree import FsTree

DEFAULT_LOCK_TIMEOUT_S = 120.0
RETRY_DELAYS_S = (0.02, 0.05, 0.1, 0.2, 0.4)


class ResultStore:
    """Result tables under ``root`` (default :func:`harness.paths.results_dir`)."""

    def __init__(self, root: Path | None = None, *, lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
        self.root = Path(root) if root is not None else results_dir()
        self.lock_timeout_s = lock_timeout_s
        self.reader = TableReader(FsTree(self.root))

    # ------------------------------------------------------------------------------------------------ locking

    @contextlib.contextmanager
    def _locked(self, benchmark: str) -> Iterator[None]:
        """Hold the benchmark's inter-process write lock."""
        ensure_dir(self.root / benchmark)
        path = self.root / layout.lock_path(benchmark)
        lock = filelock.FileLock(path, timeout=self.lock_timeout_s)
        try:
            lock.acquire(poll_interval=0.005)
        except filelock.Timeout:
            raise ResultsError(f"{path}: timed out after {self.lock_timeout_s:g} s waiting for the lock") from None
        except OSError as exc:
            raise ResultsError(f"{path}: cannot take the write lock: {describe_os_error(exc)}") from None
        try:
            yield
        finally:
            lock.release()

    # ------------------------------------------------------------------------------------------------ reading

    def benchmarks(self) -> list[str]:
        """Benchmark folders of the store."""
        return self.reader.benchmarks()

    def runs(self, benchmark: str | None = None) -> list[RunRow]:
        """Validated run rows of one benchmark or all, in table order."""
        names = [benchmark] if benchmark is not None else self.benchmarks()
        rows: list[RunRow] = []
        for name in names:
            rows.extend(self._read_settled(name))
        return rows

    def _read_settled(self, benchmark: str) -> list[RunRow]:
        """Read a table without locking (reads never write, so read-only checkouts work and no lock files appear).

        A reader racing a writer can catch the table and sidecar from different steps of the write protocol;
        that shows as a checksum mismatch which resolves within one write, so a mismatch is retried with
        backoff before it is reported (a really damaged table still fails, after about a second).
        """
        for delay in RETRY_DELAYS_S:
            try:
                return self.reader.runs_table(benchmark)
            except ChecksumError:
                time.sleep(delay)
        return self.reader.runs_table(benchmark)

    def run(self, benchmark: str, run_id: str) -> RunRow:
        """One run row by id."""
        for row in self.runs(benchmark):
            if row.run_id == run_id:
                return row
        raise ResultsError(f"{self.root / layout.runs_path(benchmark)}: no run {run_id!r}")

    def outcomes(self, benchmark: str, run_id: str) -> list[TaskOutcome]:
        """Per-sample outcomes of one run."""
        return self.reader.outcomes(benchmark, run_id)

    def outcome_records(self, benchmark: str, run_ids: Sequence[str]) -> OutcomeRecords:
        """Outcomes of several runs by column (fast path for statistics)."""
        return self.reader.outcome_records(benchmark, run_ids)

    def manifest(self, benchmark: str, run_id: str) -> Manifest:
        """The provenance manifest of one run."""
        return self.reader.manifest(benchmark, run_id)

    # ------------------------------------------------------------------------------------------------ writing

    def append_run(self, row: RunRow, outcomes: Sequence[TaskOutcome], manifest: Manifest | None = None) -> None:
        """Record a new run: its outcomes and manifest files, then its row in ``runs.csv``.

        A ``run_id`` already in the table is refused. On any error the previous table is unchanged.
        """
        bench = row.benchmark
        table = self.root / layout.runs_path(bench)
        outcome_bytes = encode_outcomes(outcomes, str(self.root / layout.outcomes_path(bench, row.run_id)))
        manifest = manifest or Manifest.for_row(row)
        manifest_bytes = encode_manifest(manifest, str(self.root / layout.manifest_path(bench, row.run_id)))
        with self._locked(bench):
            data, digest = self._read_verified(bench)
            run_ids = None if data is None else scan_run_ids(data, str(table))
            rows: list[RunRow] | None = None
            if data is not None and run_ids is None:  # old format or unusual layout: validate and rewrite all
                rows = decode_runs(data, str(table), bench)
                run_ids = [r.run_id for r in rows]
            if run_ids and row.run_id in run_ids:
                raise ResultsError(f"{table}: run_id {row.run_id!r} already recorded")
            sums = self._write_files(
                bench,
                {
                    layout.outcomes_path(bench, row.run_id): outcome_bytes,
                    layout.manifest_path(bench, row.run_id): manifest_bytes,
                },
            )
            if data is None:
                new_data = encode_runs([row])
            elif rows is None:
                new_data = data + encode_runs([row], header=False)
            else:
                new_data = encode_runs([*rows, row])
            self._write_table(bench, new_data, digest)
            self._write_sums(bench, sums.settled())

    def update_run(
        self,
        row: RunRow,
        outcomes: Sequence[TaskOutcome] | None = None,
        manifest: Manifest | None = None,
    ) -> None:
        """Replace the row with the same ``run_id`` (e.g. incomplete -> complete), keeping its position.

        ``outcomes`` and ``manifest``, when given, replace the run's files too (written before the row).
        """
        bench = row.benchmark
        table = self.root / layout.runs_path(bench)
        outcome_bytes = (
            None
            if outcomes is None
            else encode_outcomes(outcomes, str(self.root / layout.outcomes_path(bench, row.run_id)))
        )
        manifest_bytes = (
            None
            if manifest is None
            else encode_manifest(manifest, str(self.root / layout.manifest_path(bench, row.run_id)))
        )
        with self._locked(bench):
            data, digest = self._read_verified(bench)
            rows = [] if data is None else decode_runs(data, str(table), bench)
            index = next((i for i, r in enumerate(rows) if r.run_id == row.run_id), None)
            if index is None:
                raise ResultsError(f"{table}: no run {row.run_id!r} to update")
            files = {
                path: content
                for path, content in (
                    (layout.outcomes_path(bench, row.run_id), outcome_bytes),
                    (layout.manifest_path(bench, row.run_id), manifest_bytes),
                )
                if content is not None
            }
            sums = self._write_files(bench, files)
            rows[index] = row
            self._write_table(bench, encode_runs(rows), digest)
            self._write_sums(bench, sums.settled())

    def check_writable(self, benchmark: str) -> None:
        """Fail now, not after hours of training, when the table's folder cannot be written (read-only, full)."""
        folder = self.root / benchmark
        ensure_dir(folder)
        probe = folder / f".write-probe-{os.getpid()}"
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, b"\0" * 4096)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ResultsError(f"{folder}: results cannot be recorded: {describe_os_error(exc)}") from None
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()

    def rehash(self, benchmark: str) -> str:
        """Accept ``runs.csv`` and its runs' outcome and manifest files as they are, after validating them all.

        The deliberate way to accept a hand edit (e.g. after resolving a merge by hand). Writes fresh checksums
        (``runs.csv.sha256`` and ``files.sha256``) and returns the table's digest. Invalid rows or files, and a
        row whose outcome or manifest file is missing, still raise.
        """
        with self._locked(benchmark):
            tree = self.reader.tree
            data = tree.read(layout.runs_path(benchmark))
            if data is None:
                raise ResultsError(f"{self.root / layout.runs_path(benchmark)}: no such table")
            rows = decode_runs(data, str(self.root / layout.runs_path(benchmark)), benchmark)
            files: dict[str, bytes] = {}
            for row in rows:
                outcomes = layout.outcomes_path(benchmark, row.run_id)
                manifest = layout.manifest_path(benchmark, row.run_id)
                found = tree.read_many([outcomes, manifest])
                for path, content in found.items():
                    if content is None:
                        raise ResultsError(f"{tree.where(path)}: missing (run {row.run_id!r} of runs.csv)")
                decode_outcomes(found[outcomes] or b"", tree.where(outcomes), row.run_id)
                decode_manifest(found[manifest] or b"", tree.where(manifest))
                files.update({p: c for p, c in found.items() if c is not None})
            self._write_sums(benchmark, FileSums().with_files(self._relative(benchmark, files)))
            digest = sha256_hex(data)
            atomic_write(self.root / layout.checksum_path(benchmark), encode_checksum([digest], layout.RUNS_FILE))
            return digest

    # ------------------------------------------------------------------------------------------ file checksums

    @staticmethod
    def _relative(benchmark: str, files: Mapping[str, bytes]) -> dict[str, bytes]:
        return {layout.in_benchmark(benchmark, p): c for p, c in files.items()}

    def _current_sums(self, benchmark: str) -> FileSums:
        data = self.reader.tree.read(layout.file_sums_path(benchmark))
        return FileSums() if data is None else FileSums.decode(data, str(self.root / layout.file_sums_path(benchmark)))

    def _write_sums(self, benchmark: str, sums: FileSums) -> None:
        atomic_write(self.root / layout.file_sums_path(benchmark), sums.encode())

    def _write_files(self, benchmark: str, files: Mapping[str, bytes]) -> FileSums:
        """List ``files`` in ``files.sha256`` (keeping their old digests for now), then write them; the new sums."""
        sums = self._current_sums(benchmark).with_files(self._relative(benchmark, files), keep_old=True)
        self._write_sums(benchmark, sums)
        for path, content in files.items():
            atomic_write(self.root / path, content)
        return sums

    def _read_verified(self, benchmark: str) -> tuple[bytes | None, str | None]:
        """The table's bytes and digest after the checksum check (``None, None`` when there is no table yet)."""
        tree = self.reader.tree
        data = tree.read(layout.runs_path(benchmark))
        sidecar = tree.read(layout.checksum_path(benchmark))
        table, checksum = self.root / layout.runs_path(benchmark), self.root / layout.checksum_path(benchmark)
        if data is None:
            if sidecar is not None:
                raise ResultsError(f"{table}: missing, but its checksum file exists")
            return None, None
        verify_checksum(data, sidecar, str(table), str(checksum))
        return data, sha256_hex(data)

    def _write_table(self, benchmark: str, data: bytes, old_digest: str | None) -> None:
        """Replace ``runs.csv`` and its sidecar so that every intermediate state reads back valid."""
        table = self.root / layout.runs_path(benchmark)
        sidecar = self.root / layout.checksum_path(benchmark)
        new_digest = sha256_hex(data)
        if old_digest is not None and old_digest != new_digest:
            atomic_write(sidecar, encode_checksum([old_digest, new_digest], layout.RUNS_FILE))
        try:
            atomic_write(table, data)
        except ResultsError:
            if old_digest is not None:
                with contextlib.suppress(ResultsError):
                    atomic_write(sidecar, encode_checksum([old_digest], layout.RUNS_FILE))
            raise
        # the transitional sidecar already accepts this table, so this last step needs no directory sync
        atomic_write(sidecar, encode_checksum([new_digest], layout.RUNS_FILE), sync_dir=False)
