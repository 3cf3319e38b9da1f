"""`harness reproduce`: refusals (one line, exit 2) and the verdict on two runs (real git, real result files)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.provenance import run_packages
from harness.reproduce import ReproduceOptions, Reproduction, package_drift, run_arguments
from harness.results import ResultStore
from harness.results.agreement import agreement
from harness.results.codec import OutcomeRecords
from harness.results.schema import packages_string

sys.path.insert(0, str(Path(__file__).parent / "results"))
from results_factories import commit_all, init_repo, make_row, outcomes_from

from support import REPO


@pytest.fixture(scope="module")
def installed() -> str:
    return packages_string(run_packages())


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository whose first commit has no benchmark and whose second has benchmarks/math."""
    path = init_repo(tmp_path / "repo")
    bare = (
        commit_all(path, "nothing new")
        if False
        else subprocess.check_output(["git", "-C", str(path), "rev-parse", "HEAD"], text=True).strip()
    )
    (path / "benchmarks" / "math").mkdir(parents=True)
    (path / "benchmarks" / "math" / "spec.yaml").write_text("name: math\n")
    with_bench = commit_all(path, "math benchmark")
    return path, bare, with_bench


def _store(tmp_path: Path, commit: str, packages: str, **overrides: object) -> ResultStore:
    store = ResultStore(tmp_path / "results")
    outcomes = outcomes_from([True, False])
    row = make_row("r1", outcomes, git_commit=commit, packages=packages, hardware="2x cpu; gpu: none", **overrides)
    store.append_run(row, outcomes, {"args": {"as_passed": {"benchmark": "math", "skip_baseline": "False"}}})
    return store


def _check(tmp_path: Path, repo: Path, allow: bool = False) -> tuple:
    options = ReproduceOptions("r1", results_root=tmp_path / "results", repo=repo, allow_package_drift=allow)
    return Reproduction(options).check()


def test_a_commit_not_in_the_repository_is_a_one_line_refusal(tmp_path: Path, installed: str) -> None:
    _store(tmp_path, "0123456789" * 4, installed)
    env = {"HARNESS_RESULTS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "r1"], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "commit 012345678901, which is not in the repository" in lines[0]


def test_refuses_a_tree_without_the_benchmark(tmp_path: Path, repo: tuple, installed: str) -> None:
    path, bare, _ = repo
    _store(tmp_path, bare, installed)
    with pytest.raises(HarnessError, match=f"tree at commit {bare[:12]} has no benchmarks/math/spec.yaml"):
        _check(tmp_path, path)


def test_package_drift_is_refused_unless_allowed(tmp_path: Path, repo: tuple, installed: str) -> None:
    path, _, with_bench = repo
    drifted = installed.replace("pydantic=", "pydantic=0.0.1+") + ";image:policy=sha256:x"
    _store(tmp_path, with_bench, drifted)
    with pytest.raises(HarnessError, match=r"packages differ .*pydantic 0\.0\.1\+.*->.*--allow-package-drift"):
        _check(tmp_path, path)
    row, manifest, commit, drift = _check(tmp_path, path, allow=True)
    assert commit == with_bench and list(drift) == ["pydantic"]  # image digests are not compared
    assert run_arguments(row, manifest) == ["math", "--profile", "smoke", "--seed", "0", "--backend", "llama.cpp"]


def test_same_packages_pass_every_check(tmp_path: Path, repo: tuple, installed: str) -> None:
    path, _, with_bench = repo
    _store(tmp_path, with_bench, installed)
    assert _check(tmp_path, path)[3] == {}
    assert package_drift(installed + ";gone=1", run_packages()) == {"gone": ("1", "missing")}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"status": "failed", "failed_phase": "train"}, "is failed; only a complete run"),
        ({"git_dirty": True}, "uncommitted changes"),
    ],
)
def test_refuses_runs_that_cannot_be_redone(tmp_path: Path, repo: tuple, overrides: dict, message: str) -> None:
    path, _, with_bench = repo
    _store(tmp_path, with_bench, "x=1", **overrides)
    with pytest.raises(HarnessError, match=message):
        _check(tmp_path, path)


def _records(passes: list[bool], run_id: str, reward: float = 1.0) -> OutcomeRecords:
    records = OutcomeRecords()
    for i, ok in enumerate(passes):
        records.run_id.append(run_id)
        records.phase.append("after")
        records.task_id.append(f"t{i:03d}")
        records.sample.append(0)
        records.reward.append(reward if ok else 0.0)
        records.passed.append(ok)
        records.error_kind.append("")
    return records


def test_verdict_on_cpu_needs_identical_checkpoint_and_outcomes() -> None:
    a = make_row("a", hardware="2x cpu; gpu: none", model_hash_after="f" * 64)
    same = agreement(
        a, a.model_copy(update={"run_id": "b"}), _records([True, False], "a"), _records([True, False], "b")
    )
    assert same.agrees and "identical" in same.details[0]
    other = agreement(a, a, _records([True, False], "a"), _records([True, True], "b"))
    assert not other.agrees and "different" in other.details[1]
    moved = agreement(
        a, a.model_copy(update={"model_hash_after": "e" * 64}), _records([True], "a"), _records([True], "b")
    )
    assert not moved.agrees and "different" in moved.details[0]
    data = agreement(a, a.model_copy(update={"dataset_sha256": "e" * 64}), _records([True], "a"), _records([True], "b"))
    assert not data.agrees and data.details[0].startswith("dataset_sha256 differs")


def test_verdict_on_gpu_uses_the_paired_test_and_the_intervals() -> None:
    a = make_row("a", hardware="1x cpu; gpu: H200")
    passes = [i % 3 != 0 for i in range(60)]
    close = agreement(a, a, _records(passes, "a"), _records([not p if i < 2 else p for i, p in enumerate(passes)], "b"))
    assert close.agrees and "no difference" in close.details[0] and "overlap" in close.details[1]
    far = agreement(a, a, _records(passes, "a"), _records([False] * 60, "b"))
    assert not far.agrees


def test_the_reproduced_commit_converts_its_own_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloads are shared (their content is checked); converted models are not: a newer harness may write other
    files beside the weights, and the old commit's hash of the same model would then differ from its run's."""
    from harness.reproduce import own_model_cache

    shared = tmp_path / "shared"
    for name in ("models/m", "datasets/math", "wheels"):
        (shared / name).mkdir(parents=True)
    (shared / "digests.json").write_text("{}")
    monkeypatch.setenv("HARNESS_CACHE", str(shared))
    own = own_model_cache(tmp_path / "own")
    assert sorted(p.name for p in own.iterdir()) == ["datasets", "wheels"]
    assert (own / "datasets").resolve() == (shared / "datasets").resolve() and (own / "datasets" / "math").is_dir()
    (own / "models").mkdir()  # the reproduction's own conversion stays in its scratch cache
    assert not (shared / "models" / "m2").exists() and own_model_cache(tmp_path / "own") == own
