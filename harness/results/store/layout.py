"""Where each file of a result store lives, relative to the store's root (``results/`` by default).

::

    <root>/<benchmark>/runs.csv                  one row per run (RunRow)
    <root>/<benchmark>/runs.csv.sha256           checksum of runs.csv, sha256sum format
    <root>/<benchmark>/files.sha256              checksums of every outcomes and manifest file, sha256sum format
    <root>/<benchmark>/outcomes/<run_id>.csv     per-sample outcomes of a run (TaskOutcome)
    <root>/<benchmark>/manifests/<run_id>.json   provenance manifest of a run
    <root>/<benchmark>/.runs.csv.lock            inter-process write lock (not committed)

Paths are POSIX strings so the same names serve the working tree and ``git show REV:path``.
"""

from __future__ import annotations

RUNS_FILE = "runs.csv"
CHECKSUM_FILE = "runs.csv.sha256"
FILE_SUMS = "files.sha256"
LOCK_FILE = ".runs.csv.lock"
OUTCOMES_DIR = "outcomes"
MANIFESTS_DIR = "manifests"


def runs_path(benchmark: str) -> str:
    """The runs table of ``benchmark``."""
    return f"{benchmark}/{RUNS_FILE}"


def checksum_path(benchmark: str) -> str:
    """The checksum sidecar of ``benchmark``'s runs table."""
    return f"{benchmark}/{CHECKSUM_FILE}"


def file_sums_path(benchmark: str) -> str:
    """The checksums of ``benchmark``'s outcome and manifest files."""
    return f"{benchmark}/{FILE_SUMS}"


def in_benchmark(benchmark: str, relpath: str) -> str:
    """``relpath`` (relative to the store root) relative to the benchmark folder, as ``files.sha256`` names it."""
    return relpath.removeprefix(f"{benchmark}/")


def lock_path(benchmark: str) -> str:
    """The write-lock file of ``benchmark``'s tables."""
    return f"{benchmark}/{LOCK_FILE}"


def outcomes_path(benchmark: str, run_id: str) -> str:
    """The per-sample outcomes of one run."""
    return f"{benchmark}/{OUTCOMES_DIR}/{run_id}.csv"


def manifest_path(benchmark: str, run_id: str) -> str:
    """The provenance manifest of one run."""
    return f"{benchmark}/{MANIFESTS_DIR}/{run_id}.json"
