"""`harness compare` / `harness results` on a real git repository with committed result tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from results_factories import DATASET, commit_all, git, init_repo, make_row, outcomes_from, record
from typer.testing import CliRunner, Result

from harness.errors import ResultsError
from harness.results import ResultStore
from harness.results.cli import register
from harness.results.compare import CompareCommand, compare
from harness.results.sources import RevisionSource, RunIdsSource, WorktreeSource, parse_source


@dataclass
class Repo:
    path: Path
    root: Path
    store: ResultStore
    commits: list[str]


def passes(n_tasks: int, passing: range | set[int]) -> list[bool]:
    return [i in passing for i in range(n_tasks)]


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """Two commits of result tables: math/smoke regresses 45/50 -> 20/50, other/smoke is noise 25/50 -> 24/50."""
    path = init_repo(tmp_path / "repo")
    code_v0 = git(path, "rev-parse", "HEAD")
    root = path / "results"
    store = ResultStore(root)
    record(store, "math-a", passes(50, range(45)), git_commit=code_v0, started_at="2025-01-01T00:00:00Z")
    record(
        store,
        "other-a",
        passes(50, range(25)),
        benchmark="other",
        git_commit=code_v0,
        started_at="2025-01-01T01:00:00Z",
    )
    (path / "code.py").write_text("VERSION = 1\n")
    first = commit_all(path, "code v1 + results of v0")
    record(store, "math-b", passes(50, range(20)), git_commit=first, started_at="2025-01-02T00:00:00Z")
    record(
        store,
        "other-b",
        passes(50, range(1, 25)),
        benchmark="other",
        git_commit=first,
        started_at="2025-01-02T01:00:00Z",
    )
    second = commit_all(path, "results of v1")
    return Repo(path, root, store, [code_v0, first, second])


def cli(repo: Repo, *args: str) -> Result:
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, list(args), env={"HARNESS_RESULTS": str(repo.root), "COLUMNS": "200"})


def pairs_by_name(result: Result) -> dict[str, dict]:
    data = json.loads(result.stdout)
    return {f"{p['benchmark']}/{p['profile']}": p for p in data["pairs"]}


def test_compare_finds_the_planted_regression_and_marks_noise(repo: Repo) -> None:
    result = cli(repo, "compare", "HEAD~1", "HEAD", "--format", "json")
    assert result.exit_code == 0, result.output
    pairs = pairs_by_name(result)
    math = pairs["math/smoke"]
    assert math["mark"] == "-"
    assert math["a"]["pass_rate"] == 0.9 and math["b"]["pass_rate"] == 0.4
    assert math["diff"] == pytest.approx(-0.5)
    assert math["diff_ci_high"] < 0
    assert math["test"] == "mcnemar exact"
    assert math["p_value"] == pytest.approx(2 * 0.5**25)
    assert math["new_failures"] == [f"t{i:03d}" for i in range(20, 45)]
    assert math["fixed"] == []
    assert math["a"]["run_ids"] == ["math-a"] and math["b"]["run_ids"] == ["math-b"]
    noise = pairs["other/smoke"]
    assert noise["mark"] == "~"
    assert noise["diff"] == pytest.approx(-0.02)
    assert noise["p_value"] == 1.0
    assert noise["new_failures"] == ["t000"]
    assert json.loads(result.stdout)["regressions"] == 1


def test_fail_on_regression_exit_codes(repo: Repo) -> None:
    assert cli(repo, "compare", "HEAD~1", "HEAD", "--fail-on-regression").exit_code == 1
    assert cli(repo, "compare", "HEAD~1", "HEAD").exit_code == 0
    assert cli(repo, "compare", "HEAD~1", "HEAD", "--benchmark", "other", "--fail-on-regression").exit_code == 0
    assert cli(repo, "compare", "HEAD", "HEAD", "--fail-on-regression").exit_code == 0
    assert cli(repo, "compare", "HEAD", "HEAD~1", "--fail-on-regression").exit_code == 0  # the reverse improves


def test_table_and_markdown_output(repo: Repo) -> None:
    table = cli(repo, "compare", "HEAD~1", "HEAD")
    assert table.exit_code == 0
    assert "math/smoke" in table.stdout and "other/smoke" in table.stdout
    assert "-50.0 pp" in table.stdout and "1 regression(s)" in table.stdout
    assert "new failures: t020" in table.stdout
    md = cli(repo, "compare", "HEAD~1", "HEAD", "--format", "md")
    assert md.exit_code == 0
    lines = md.stdout.splitlines()
    row = next(line for line in lines if "math/smoke" in line)
    assert row.startswith("| - | math/smoke | 90.0% [")
    assert next(line for line in lines if "other/smoke" in line).startswith("| ~ | other/smoke |")


@pytest.mark.parametrize("bad", ["nope", "HEAD~99", "-rf", "deadbeef"])
def test_bad_revision_is_a_one_line_user_error(repo: Repo, bad: str) -> None:
    result = cli(repo, "compare", "--", bad, "HEAD")
    assert isinstance(result.exception, ResultsError)
    message = str(result.exception)
    assert "\n" not in message and repr(bad) in message
    assert result.exception.exit_code == 2


def test_unknown_benchmark_is_a_user_error(repo: Repo) -> None:
    result = cli(repo, "compare", "HEAD~1", "HEAD", "--benchmark", "maths")
    assert isinstance(result.exception, ResultsError) and "'maths'" in str(result.exception)


def test_results_folder_outside_git_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="not inside a git repository"):
        RevisionSource("HEAD", tmp_path / "results")


def test_worktree_and_run_sources(repo: Repo) -> None:
    head = repo.commits[-1]
    record(repo.store, "math-c", passes(50, range(46)), git_commit=head, started_at="2025-01-03T00:00:00Z")
    result = compare(RevisionSource("HEAD", repo.root), WorktreeSource(repo.root), benchmark="math")
    (pair,) = result.pairs
    assert pair.mark == "+" and pair.b is not None and pair.b.run_ids == ["math-c"]
    assert result.a_label.startswith("HEAD (")
    explicit = compare(RunIdsSource(["math-a"], repo.root), parse_source("run:math-b", repo.root))
    assert [p.mark for p in explicit.pairs] == ["-"]
    assert cli(repo, "compare", "HEAD", ".", "--fail-on-regression").exit_code == 0
    assert cli(repo, "compare", "run:math-c", "run:math-b", "--fail-on-regression").exit_code == 1
    missing = cli(repo, "compare", "run:math-a", "run:ghost")
    assert isinstance(missing.exception, ResultsError) and "'ghost' not found" in str(missing.exception)


def test_not_comparable_and_missing_sides_are_marked_x(repo: Repo) -> None:
    record(
        repo.store,
        "math-other-data",
        passes(50, range(40)),
        dataset_sha256="e" * 64,
        git_commit=repo.commits[-1],
        started_at="2025-01-03T00:00:00Z",
    )
    record(repo.store, "new-bench", passes(10, range(5)), benchmark="fresh", started_at="2025-01-03T00:00:00Z")
    result = compare(RevisionSource("HEAD", repo.root), WorktreeSource(repo.root))
    marks = {f"{p.benchmark}/{p.profile}": p for p in result.pairs}
    assert marks["math/smoke"].mark == "x" and "dataset_sha256" in marks["math/smoke"].reason
    assert marks["fresh/smoke"].mark == "x" and "side A" in marks["fresh/smoke"].reason
    assert marks["other/smoke"].mark == "~"
    assert result.regressions == 0
    split = compare(RunIdsSource(["math-a"], repo.root), RunIdsSource(["math-other-data"], repo.root))
    assert split.pairs[0].mark == "x"


def test_seeds_are_pooled_by_task_and_infra_errors_excluded(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    # commit A: 3 seeds x 2 samples, task i passes in every sample when i < 30 -> 30/40
    for seed in range(3):
        record(store, f"a{seed}", [[i < 30] * 2 for i in range(40)], seed=seed, git_commit="a" * 40, group_id="ga")
    # commit B: task i passes when i < 10; one infra error on task 39 of seed 0
    for seed in range(3):
        outcomes = outcomes_from([[i < 10] * 2 for i in range(40)], infra=[(39, 0)] if seed == 0 else [])
        row = make_row(
            f"b{seed}", outcomes, seed=seed, git_commit="b" * 40, group_id="gb", started_at="2025-02-01T00:00:00Z"
        )
        store.append_run(row, outcomes, {})
    result = compare(RunIdsSource(["a0", "a1", "a2"], store.root), RunIdsSource(["b0", "b1", "b2"], store.root))
    (pair,) = result.pairs
    assert pair.a is not None and pair.b is not None
    assert pair.a.n_samples == 240 and pair.b.n_samples == 239 and pair.b.infra_errors == 1
    assert pair.a.pass_rate == 0.75 and pair.b.pass_rate == 0.25
    assert pair.a.ci_method == "wilson-design-effect"
    assert pair.test == "sign-flip exact" and pair.mark == "-"
    assert pair.p_value == pytest.approx(2 * 0.5**20)  # 20 tasks changed, all the same direction
    assert pair.a.pass_hat_k == {k: 0.75 for k in range(1, 7)}
    # the worktree pools the seeds of the latest measured commit
    worktree = WorktreeSource(store.root).groups()
    assert [r.run_id for r in worktree[("math", "smoke")]] == ["b0", "b1", "b2"]


def test_incomplete_and_failed_runs_are_not_compared(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    record(store, "ok", [True, False], started_at="2025-01-01T00:00:00Z")
    store.append_run(make_row("late", status="incomplete", started_at="2025-01-05T00:00:00Z"), [], {})
    store.append_run(
        make_row("broke", status="failed", failed_phase="train", started_at="2025-01-06T00:00:00Z"), [], {}
    )
    assert [r.run_id for r in WorktreeSource(store.root).groups()[("math", "smoke")]] == ["ok"]


def test_compare_command_object_from_python(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    command = CompareCommand("HEAD~1", "HEAD", fmt="json", fail_on_regression=True, root=repo.root)
    assert command.run() == 1
    assert json.loads(capsys.readouterr().out)["regressions"] == 1
    assert command.comparison().regressions == 1


def test_committed_corrupt_table_is_reported_with_its_revision(repo: Repo) -> None:
    table = repo.root / "math" / "runs.csv"
    table.write_text(table.read_text().replace("tiny-model", "tampered"))
    commit_all(repo.path, "tamper")
    with pytest.raises(ResultsError, match=r"HEAD:results/math/runs.csv: checksum mismatch"):
        compare(RevisionSource("HEAD~2", repo.root), RevisionSource("HEAD", repo.root))


def test_results_command_lists_and_filters(repo: Repo) -> None:
    listing = cli(repo, "results", "--format", "json")
    assert listing.exit_code == 0, listing.output
    assert [r["run_id"] for r in json.loads(listing.stdout)] == ["math-a", "math-b", "other-a", "other-b"]
    first = repo.commits[1]
    filtered = cli(repo, "results", "--commit", first[:8], "--benchmark", "math", "--format", "json")
    assert [r["run_id"] for r in json.loads(filtered.stdout)] == ["math-b"]
    md = cli(repo, "results", "--format", "md", "--profile", "smoke")
    assert md.stdout.startswith("| run_id | started_at |") and md.stdout.count("\n") == 6
    assert "math-a" in cli(repo, "results").stdout
    assert cli(repo, "results", "--profile", "nope", "--format", "json").stdout.strip() == "[]"


def test_results_rehash_command(repo: Repo) -> None:
    table = repo.root / "math" / "runs.csv"
    table.write_text(table.read_text().replace("tiny-model", "edited"))
    broken = cli(repo, "results")
    assert isinstance(broken.exception, ResultsError) and "--rehash" in str(broken.exception)
    fixed = cli(repo, "results", "--rehash", "--benchmark", "math")
    assert fixed.exit_code == 0 and "accepted" in fixed.stdout
    assert cli(repo, "results").exit_code == 0


def test_dataset_constant_is_a_sha256() -> None:
    assert len(DATASET) == 64
