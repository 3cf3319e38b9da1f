"""Every file a comparison or report reads is under checksum: planted edits, --verify, --rehash, legacy tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from results_factories import EVAL_ONLY, REPO_ROOT, commit_all, init_repo, make_row, outcomes_from, record

from harness.errors import ResultsError
from harness.results.compare.compare import compare
from harness.results.store.manifest import Manifest
from harness.results.store.sources import RevisionSource, RunIdsSource
from harness.results.store.store import ResultStore


def harness(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_RESULTS": str(root), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT
    )


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    store = ResultStore(tmp_path / "results")
    record(store, "r1", [i % 2 == 0 for i in range(50)])
    record(store, "r2", [i % 3 == 0 for i in range(50)])
    return store


def test_one_byte_in_an_outcome_file_is_exit_2_naming_the_file(store: ResultStore) -> None:
    assert harness(store.root, "compare", "run:r1", "run:r2").returncode == 0
    path = store.root / "math" / "outcomes" / "r1.csv"
    path.write_text(path.read_text().replace("t001", "t00x", 1))  # still a valid outcomes file
    proc = harness(store.root, "compare", "run:r1", "run:r2")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert str(path) in line and "checksum mismatch" in line and "--rehash" in line
    verify = harness(store.root, "results", "--verify")
    assert verify.returncode == 2 and str(path) in verify.stderr
    accepted = harness(store.root, "results", "--rehash")  # the deliberate way to accept the edit
    assert accepted.returncode == 0, accepted.stderr
    assert harness(store.root, "results", "--verify").returncode == 0
    result = compare(RunIdsSource(["r1"], store.root), RunIdsSource(["r2"], store.root))
    assert result.pairs[0].n_paired_tasks == 49  # t00x has data on one side only now


def test_manifests_are_checked_too(store: ResultStore) -> None:
    path = store.root / "math" / "manifests" / "r2.json"
    path.write_text(path.read_text().replace('"r2"', '"r9"'))
    with pytest.raises(ResultsError, match=r"r2\.json: checksum mismatch"):
        store.manifest("math", "r2")


def test_verify_reports_missing_stray_and_unlisted_files(store: ResultStore) -> None:
    assert harness(store.root, "results", "--verify").stdout.startswith("ok: 2 runs, 5 files")
    (store.root / "math" / "outcomes" / "r2.csv").unlink()
    (store.root / "math" / "outcomes" / "stray.csv").write_text("phase\n")
    proc = harness(store.root, "results", "--verify")
    assert proc.returncode == 2
    problems = proc.stderr.strip().splitlines()
    assert any("r2.csv: missing (run 'r2'" in p for p in problems)
    assert any("stray.csv: no run of" in p for p in problems)
    assert len(problems) == 2
    rehash = harness(store.root, "results", "--rehash")
    assert rehash.returncode == 2 and "r2.csv: missing" in rehash.stderr


def test_a_store_without_file_checksums_asks_for_a_rehash(store: ResultStore) -> None:
    (store.root / "math" / "files.sha256").unlink()
    with pytest.raises(ResultsError, match=r"files\.sha256: missing.*--rehash"):
        store.outcomes("math", "r1")
    store.rehash("math")
    assert len(store.outcomes("math", "r1")) == 50


def test_updates_and_appends_keep_the_checksums_settled(store: ResultStore) -> None:
    outcomes = outcomes_from([True, True])
    updated = make_row("r1", outcomes, note="updated")
    store.update_run(updated, outcomes, Manifest.for_row(updated).model_copy(update={"hardware": "new"}))
    record(store, "r3", [False])
    sums = (store.root / "math" / "files.sha256").read_text().splitlines()
    assert len(sums) == 6  # one line per file: no transitional digest left behind
    subprocess.run(["sha256sum", "--check", "--quiet", "files.sha256"], cwd=store.root / "math", check=True)
    assert store.manifest("math", "r1").hardware == "new"


def test_tables_committed_before_file_checksums_still_compare(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    store = ResultStore(repo / "results")
    record(store, "old", [True, False] * 10, **EVAL_ONLY)
    (store.root / "math" / "files.sha256").unlink()  # as a harness without file checksums wrote it
    commit_all(repo, "legacy table")
    record(store, "new", [True, True] * 10, started_at="2025-02-01T00:00:00Z", **EVAL_ONLY)
    result = compare(RevisionSource("HEAD", store.root), RunIdsSource(["new"], store.root))
    assert result.pairs[0].mark == "+"
