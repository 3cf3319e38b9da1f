"""`harness reproduce`: refusals (one line, exit 2) and the verdict on two runs (real git, real result files); one
slow test reproduces a real run whose recorded outcome was altered, and must say it does not agree (exit 1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.paths import cache_dir, env_python
from harness.results.stats.agreement import agreement
from harness.results.store.codec import OutcomeRecords
from harness.results.store.manifest import ArgsRecord, Manifest
from harness.results.store.schema import packages_string
from harness.results.store.store import ResultStore
from harness.run.provenance import run_packages
from harness.run.reproduce import ReproduceOptions, Reproduction, package_drift, run_arguments
from harness.spec.options import RunOptions

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
    args = ArgsRecord(as_passed={"benchmark": "math", "skip_baseline": False})
    store.append_run(row, outcomes, Manifest.for_row(row).model_copy(update={"args": args}))
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


XEON = "2x Intel(R) Xeon(R) Processor [6/207/2: avx2 avx512f amx_bf16]; 24 GiB; gpu: none"
EPYC = "2x AMD EPYC 7B13 [25/1/1: avx2]; 24 GiB; gpu: none"


def test_verdict_on_one_cpu_needs_identical_checkpoint_and_outcomes() -> None:
    a = make_row("a", hardware=XEON, model_hash_after="f" * 64)
    same = agreement(
        a, a.model_copy(update={"run_id": "b"}), _records([True, False], "a"), _records([True, False], "b")
    )
    assert same.agrees and same.details[0].startswith("criterion: both on 2x Intel") and "identical" in same.details[1]
    other = agreement(a, a, _records([True, False], "a"), _records([True, True], "b"))
    assert not other.agrees and "different" in other.details[2]
    moved = agreement(
        a, a.model_copy(update={"model_hash_after": "e" * 64}), _records([True], "a"), _records([True], "b")
    )
    assert not moved.agrees and "different" in moved.details[1]
    data = agreement(a, a.model_copy(update={"dataset_sha256": "e" * 64}), _records([True], "a"), _records([True], "b"))
    assert not data.agrees and data.details[0].startswith("dataset_sha256 differs")


def test_on_another_cpu_identical_outcomes_agree_by_the_statistical_criterion() -> None:
    """The same 40 outcomes, a different trained checkpoint hash, two CPUs: not "does not agree"."""
    a = make_row("a", hardware=EPYC, model_hash_after="f" * 64)
    b = a.model_copy(update={"run_id": "b", "hardware": XEON, "model_hash_after": "e" * 64})
    passes = [i % 2 == 0 for i in range(40)]
    verdict = agreement(a, b, _records(passes, "a"), _records(passes, "b"))
    assert verdict.agrees and verdict.method == "paired test and overlapping intervals"
    assert verdict.details[0].startswith("criterion: different CPUs (2x AMD EPYC 7B13")
    old = agreement(a.model_copy(update={"hardware": "2x AMD EPYC; 24 GiB; gpu: none"}), b, _records(passes, "a"),
                    _records(passes, "b"))  # fmt: skip
    assert old.agrees and "cannot be told apart precisely" in old.details[0]


def test_verdict_on_gpu_uses_the_paired_test_and_the_intervals() -> None:
    a = make_row("a", hardware="1x cpu; gpu: H200")
    passes = [i % 3 != 0 for i in range(60)]
    close = agreement(a, a, _records(passes, "a"), _records([not p if i < 2 else p for i, p in enumerate(passes)], "b"))
    assert close.agrees and "no difference" in close.details[1] and "overlap" in close.details[2]
    assert close.details[0].startswith("criterion: a GPU ran")
    far = agreement(a, a, _records(passes, "a"), _records([False] * 60, "b"))
    assert not far.agrees


def test_the_reproduced_commit_converts_its_own_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Downloads are shared (their content is checked); converted models are not: a newer harness may write other
    files beside the weights, and the old commit's hash of the same model would then differ from its run's."""
    from harness.run.reproduce import own_model_cache

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


def test_the_reproducing_run_keeps_packages_installed_into_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU machine set up by scripts/gpu-install.sh the packages are a folder on PYTHONPATH beside the checkout:
    the reproducing run imports the commit's harness first and still finds them (the checkout itself is left out)."""
    from harness.paths import REPO_ROOT

    site = tmp_path / "site"
    (site / "installed_gpu_pkg").mkdir(parents=True)
    (site / "installed_gpu_pkg" / "__init__.py").write_text("")
    tree = tmp_path / "tree"
    (tree / "harness").mkdir(parents=True)
    (tree / "harness" / "__init__.py").write_text("COMMIT = 'reproduced'\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), str(site)]))
    options = ReproduceOptions("r1", results_root=tmp_path / "results")
    env = Reproduction(options)._child_env(tree, tmp_path / "scratch")
    assert env["PYTHONPATH"] == os.pathsep.join([str(tree), str(site)])
    probe = "import harness, installed_gpu_pkg; print(harness.COMMIT)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tree, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "reproduced", out.stderr[-2000:]


@pytest.mark.parametrize(("status", "phase"), [("incomplete", "eval"), ("failed", "train")])
def test_an_unfinished_run_is_refused_in_one_line_with_exit_2(
    tmp_path: Path, repo: tuple, installed: str, status: str, phase: str
) -> None:
    """Through the CLI: a run recorded incomplete (interrupted) or failed has no result to repeat."""
    _, _, with_bench = repo
    _store(tmp_path, with_bench, installed, status=status, failed_phase=phase)
    env = {"HARNESS_RESULTS": str(tmp_path / "results"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "r1"], capture_output=True, text=True, env=env, cwd=REPO
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"error: reproduce: run r1 is {status}; only a complete run can be reproduced"
    ], proc.stderr
    assert proc.stdout == ""
    assert [r.run_id for r in ResultStore(tmp_path / "results").runs()] == ["r1"]  # nothing ran, nothing recorded


def _arith_checkout(dest: Path) -> Path:
    """A git repository with this checkout's harness and the arith benchmark, committed: a clean commit to run."""
    shutil.copytree(REPO / "harness", dest / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        REPO / "benchmarks" / "arith", dest / "benchmarks" / "arith", ignore=shutil.ignore_patterns("__pycache__")
    )
    (dest / ".gitignore").write_text("__pycache__/\n")
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "arith checkout"]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, capture_output=True)
    return dest


@pytest.mark.slow
def test_a_reproduction_that_disagrees_exits_1(smoke_model: Path, tmp_path: Path) -> None:
    """A real run (arith, evaluation only, two tasks) is recorded a second time, in another results folder, with
    one task's outcome turned round; reproducing that record re-runs the commit, which gives the real outcomes:
    they differ from the record, so the verdict is "does not agree" and the exit code 1."""
    checkout = _arith_checkout(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_BENCHMARKS"}
    env.update(
        PYTHONPATH=str(checkout),
        HARNESS_RESULTS=str(tmp_path / "measured"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        HARNESS_CACHE=str(cache_dir()),
        HARNESS_ENV_SERVE_CPU=str(env_python("serve-cpu").parent.parent),
        HARNESS_ENV_CALCULATOR=str(env_python("calculator").parent.parent),
    )
    args = ["run", "arith", "--eval-only", "--limit", "2", "--backend", "local"]
    first = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, cwd=checkout, timeout=900
    )
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    measured = ResultStore(tmp_path / "measured")
    (row,) = measured.runs("arith")
    assert row.status == "complete" and not row.git_dirty
    real = measured.outcomes("arith", row.run_id)
    assert len(real) == 2
    # the same row and manifest, with the first task's outcome turned round
    turned = [real[0].model_copy(update={"passed": not real[0].passed, "reward": 1.0 - real[0].reward}), real[1]]
    recorded = ResultStore(tmp_path / "recorded")
    recorded.append_run(row, turned, measured.manifest("arith", row.run_id))

    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", row.run_id],
        capture_output=True,
        text=True,
        env={**env, "HARNESS_RESULTS": str(tmp_path / "recorded")},
        cwd=checkout,
        timeout=900,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = recorded.runs("arith")
    assert len(runs) == 2 and runs[1].note == f"reproduces {row.run_id}" and runs[1].status == "complete"
    again = runs[1]
    lines = proc.stdout.splitlines()
    assert "  trained checkpoint none vs none: identical" in lines
    assert "  2 vs 2 outcomes: different" in lines
    assert lines[-1] == f"{again.run_id} does not agree with {row.run_id} (CPU: identical checkpoint and outcomes)"
    # the re-run gave the outcomes the commit really gives: the turned one is all that differs
    assert recorded.outcomes("arith", again.run_id) == real
    worktrees = subprocess.run(["git", "-C", str(checkout), "worktree", "list"], capture_output=True, text=True)
    assert worktrees.stdout.count("\n") == 1  # the reproduction's worktree is gone


def test_the_command_is_rebuilt_from_the_recorded_options(tmp_path: Path) -> None:
    """What a run was asked for, recorded by the runner (``resolved``), comes back as the same ``harness run``
    arguments: the switches that were on, the overrides, the row's profile, seed and backend; never a path, a Ray
    address or the group of the invocation."""
    options = RunOptions(
        benchmark="arith",
        profile="learn-cpu",
        seed=3,
        group_id="arith-0123abcd",
        data_mirror=tmp_path,
        skip_baseline=True,
        backend="docker",
        ray_address="10.0.0.1:6379",
        limit=20,
        trials=2,
    )
    outcomes = outcomes_from([True, False])
    row = make_row("r2", outcomes, benchmark="arith", profile="learn-cpu", seed=3, backend="docker")
    args = ArgsRecord(as_passed=options.recorded(), resolved=options.recorded())
    manifest = Manifest.for_row(row).model_copy(update={"args": args})
    manifest = Manifest.model_validate_json(json.dumps(manifest.to_json()))  # as read back from the store
    expected = ["arith", "--profile", "learn-cpu", "--seed", "3", "--backend", "docker", "--skip-baseline"]
    assert run_arguments(row, manifest) == [*expected, "--limit", "20", "--trials", "2"]
    rebuilt = RunOptions.from_recorded(dict(manifest.args.resolved))
    assert rebuilt == options.model_copy(update={"data_mirror": None})  # paths are not recorded
    evaluated = ArgsRecord(resolved=RunOptions(benchmark="arith", eval_only=True, checkpoint=tmp_path).recorded())
    with pytest.raises(HarnessError, match="evaluated a checkpoint given by path"):
        run_arguments(row, manifest.model_copy(update={"args": evaluated}))
