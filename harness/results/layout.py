"""Where each file of a result store lives, relative to the store's root (``results/`` by default).

::

    <root>/<benchmark>/runs.csv                  one row per run (RunRow)
    <root>/<benchmark>/runs.csv.sha256           checksum of runs.csv, sha256sum format
    <root>/<benchmark>/outcomes/<run_id>.csv     per-sample outcomes of a run (TaskOutcome)
    <root>/<benchmark>/manifests/<run_id>.json   provenance manifest of a run
    <root>/<benchmark>/.runs.csv.lock            inter-process write lock (not committed)

Paths are POSIX strings so the same names serve the working tree and ``git show REV:path``.
"""

from __future__ import annotations

RUNS_FILE = "runs.csv"
CHECKSUM_FILE = "runs.csv.sha256"
LOCK_FILE = ".runs.csv.lock"
OUTCOMES_DIR = "outcomes"
MANIFESTS_DIR = "manifests"


def runs_path(benchmark: str) -> str:
    """The runs table of ``benchmark``."""
    return f"{benchmark}/{RUNS_FILE}"


def checksum_path(benchmark: str) -> str:
    """The checksum sidecar of ``benchmark``'s runs table."""
    return f"{benchmark}/{CHECKSUM_FILE}"


def lock_path(benchmark: str) -> str:
    """The write-lock file of ``benchmark``'s tables."""
    return f"{benchmark}/{LOCK_FILE}"


def outcomes_path(benchmark: str, run_id: str) -> str:
    """The per-sample outcomes of one run."""
    return f"{benchmark}/{OUTCOMES_DIR}/{run_id}.csv"


def manifest_path(benchmark: str, run_id: str) -> str:
    """The provenance manifest of one run."""
    return f"{benchmark}/{MANIFESTS_DIR}/{run_id}.json"
