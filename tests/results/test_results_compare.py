"""`harness compare` / `harness results` on a real git repository with committed result tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from results_factories import EVAL_ONLY, commit_all, git, init_repo, make_row, outcomes_from, record
from typer.testing import CliRunner, Result

from harness.errors import ResultsError
from harness.results.cli import register
from harness.results.compare.compare import CompareCommand, compare
from harness.results.store.sources import RevisionSource, RunIdsSource, WorktreeSource, parse_source
from harness.results.store.store import ResultStore


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
    """Two commits of result tables: math/smoke regresses 45/50 -> 20/50, other/smoke is noise 25/50 -> 24/50.

    The runs evaluate without training, so a comparison pairs their tasks (trained runs: test_seed_units.py)."""
    path = init_repo(tmp_path / "repo")
    code_v0 = git(path, "rev-parse", "HEAD")
    root = path / "results"
    store = ResultStore(root)
    record(store, "math-a", passes(50, range(45)), git_commit=code_v0, started_at="2025-01-01T00:00:00Z", **EVAL_ONLY)
    record(
        store,
        "other-a",
        passes(50, range(25)),
        benchmark="other",
        git_commit=code_v0,
        started_at="2025-01-01T01:00:00Z",
        **EVAL_ONLY,
    )
    (path / "code.py").write_text("VERSION = 1\n")
    first = commit_all(path, "code v1 + results of v0")
    record(store, "math-b", passes(50, range(20)), git_commit=first, started_at="2025-01-02T00:00:00Z", **EVAL_ONLY)
    record(
        store,
        "other-b",
        passes(50, range(1, 25)),
        benchmark="other",
        git_commit=first,
        started_at="2025-01-02T01:00:00Z",
        **EVAL_ONLY,
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
    text = " ".join(table.stdout.split())  # the caption wraps
    assert "math/smoke" in text and "other/smoke" in text
    assert "-50.0 pp" in text and "1 regression(s)" in text
    assert "A pass and B pass are over each side's own tasks; B - A, its CI and p are over the paired tasks" in text
    assert "new failures: t020" in text
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


def test_runs_of_another_benchmark_version_are_not_compared_or_pooled(repo: Repo) -> None:
    record(
        repo.store,
        "math-v2",
        passes(50, range(49)),
        benchmark_version=2,
        git_commit=repo.commits[-1],
        started_at="2025-01-03T00:00:00Z",
    )
    pair = compare(RunIdsSource(["math-b"], repo.root), RunIdsSource(["math-v2"], repo.root)).pairs[0]
    assert pair.mark == "x" and "benchmark_version 1 vs 2" in pair.reason
    assert cli(repo, "compare", "run:math-b", "run:math-v2", "--fail-on-regression").exit_code == 1
    with pytest.raises(ResultsError, match=r"cannot be pooled: .*benchmark version"):
        RunIdsSource(["math-b", "math-v2"], repo.root).groups()


def test_seeds_are_pooled_by_task_and_infra_errors_excluded(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    # commit A: 3 evaluation seeds x 2 samples, task i passes in every sample when i < 30 -> 30/40
    for seed in range(3):
        record(
            store,
            f"a{seed}",
            [[i < 30] * 2 for i in range(40)],
            seed=seed,
            git_commit="a" * 40,
            group_id="ga",
            **EVAL_ONLY,
        )
    # commit B: task i passes when i < 10; one infra error on task 39 of seed 0
    for seed in range(3):
        outcomes = outcomes_from([[i < 10] * 2 for i in range(40)], infra=[(39, 0)] if seed == 0 else [])
        row = make_row(
            f"b{seed}",
            outcomes,
            seed=seed,
            git_commit="b" * 40,
            group_id="gb",
            started_at="2025-02-01T00:00:00Z",
            **EVAL_ONLY,
        )
        store.append_run(row, outcomes)
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
    store.append_run(make_row("late", status="incomplete", started_at="2025-01-05T00:00:00Z"), [])
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


def test_the_phases_of_one_run_and_runs_of_two_profiles_compare(tmp_path: Path) -> None:
    """``run:<id>@before`` against ``run:<id>@after`` compares one run's baseline with its trained model; two named
    runs of different profiles (a tuned profile trained without its own baseline) pair up when asked."""
    store = ResultStore(tmp_path / "results")
    outcomes = outcomes_from([[False] * 4 for _ in range(20)], phase="before") + outcomes_from(
        [[i < 12] * 4 for i in range(20)], phase="after"
    )
    store.append_run(make_row("r1", outcomes, profile="reference"), outcomes)
    tuned = outcomes_from([[i < 15] * 4 for i in range(20)])
    store.append_run(make_row("t1", tuned, profile="tuned"), tuned)

    (pair,) = compare(parse_source("run:r1@before", store.root), parse_source("run:r1@after", store.root)).pairs
    assert pair.a is not None and pair.b is not None
    assert (pair.a.phases, pair.b.phases) == (["before"], ["after"])
    assert (pair.a.pass_rate, pair.b.pass_rate, pair.mark) == (0.0, 0.6, "+")
    assert pair.p_value == pytest.approx(2 * 0.5**12)  # 12 tasks gained, none lost

    (cross,) = compare(
        parse_source("run:r1@before", store.root), parse_source("run:t1", store.root), across_profiles=True
    ).pairs
    assert cross.profile == "reference vs tuned" and cross.mark == "+" and cross.diff == pytest.approx(0.75)
    apart = compare(parse_source("run:r1@before", store.root), parse_source("run:t1", store.root)).pairs
    assert [p.mark for p in apart] == ["x", "x"]  # without asking, other profiles are other pairs
    with pytest.raises(ResultsError, match="--across-profiles pairs runs named by id"):
        compare(WorktreeSource(store.root), parse_source("run:t1", store.root), across_profiles=True)
    default = compare(parse_source("run:r1", store.root), parse_source("run:r1@before", store.root)).pairs[0]
    assert default.a is not None and default.a.phases == ["after"]  # a run's final phase unless one is named

    with pytest.raises(ResultsError, match="the phase after @ is before or after, not 'during'"):
        parse_source("run:r1@during", store.root)
    with pytest.raises(ResultsError, match=r"run:t1@before: the run\(s\) have no before outcomes"):
        compare(parse_source("run:t1@before", store.root), parse_source("run:t1", store.root))


def test_x_pairs_fail_the_gate_unless_allowed(repo: Repo) -> None:
    record(repo.store, "new-bench", passes(10, range(5)), benchmark="fresh", started_at="2025-01-03T00:00:00Z")
    gate = cli(repo, "compare", "HEAD", ".", "--fail-on-regression", "--format", "json")
    assert gate.exit_code == 1  # a benchmark appeared on one side only: the gate notices
    fresh = pairs_by_name(gate)["fresh/smoke"]
    assert fresh["mark"] == "x" and json.loads(gate.stdout)["not_comparable"] == 1
    assert "fresh/smoke" in fresh["reason"] and "side A (table at " in fresh["reason"]
    assert cli(repo, "compare", "HEAD", ".", "--fail-on-regression", "--allow-missing").exit_code == 0
    assert cli(repo, "compare", "HEAD", ".").exit_code == 0
    alone = cli(repo, "compare", "HEAD", ".", "--allow-missing")  # only with --fail-on-regression
    assert isinstance(alone.exception, ResultsError) and "--fail-on-regression" in str(alone.exception)


def test_a_missing_profile_names_what_the_side_has(repo: Repo) -> None:
    record(repo.store, "math-verl", passes(50, range(40)), profile="verl", started_at="2025-01-03T00:00:00Z")
    result = compare(RunIdsSource(["math-a"], repo.root), RunIdsSource(["math-verl"], repo.root))
    reasons = {f"{p.benchmark}/{p.profile}": p.reason for p in result.pairs}
    assert "no runs of math/verl on side A (runs math-a); those runs are of math/smoke" == reasons["math/verl"]
    assert "those runs are of math/verl" in reasons["math/smoke"]


def test_failed_or_incomplete_runs_named_by_id_are_flagged(repo: Repo) -> None:
    outcomes = outcomes_from(passes(50, range(10)))
    repo.store.append_run(make_row("math-broke", outcomes, status="failed", failed_phase="eval"), outcomes)
    result = cli(repo, "compare", "run:math-a", "run:math-broke", "--format", "json")
    pair = pairs_by_name(result)["math/smoke"]
    assert pair["warnings"] == ["side B: run math-broke is failed in phase eval; its outcomes are partial"]
    table = cli(repo, "compare", "run:math-a", "run:math-broke")
    assert "warning: side B: run math-broke is failed" in " ".join(table.stdout.split())


def test_code_source_compares_the_code_not_the_table(repo: Repo) -> None:
    code_v0, first, _ = repo.commits
    # the table at code_v0 predates every row, so a revision side is empty there, and says where to look
    by_table = compare(parse_source(code_v0, repo.root), parse_source("HEAD", repo.root), benchmark="math")
    (pair,) = by_table.pairs
    assert pair.mark == "x" and f"table at {code_v0[:10]}" in pair.reason
    assert f"try code:{code_v0[:10]}" in pair.reason
    # the runs measured with the code at code_v0 (committed later, in `first`) against those of `first`
    by_code = compare(parse_source(f"code:{code_v0}", repo.root), parse_source(f"code:{first}", repo.root))
    marks = {f"{p.benchmark}/{p.profile}": p for p in by_code.pairs}
    assert marks["math/smoke"].mark == "-" and marks["math/smoke"].a is not None
    assert marks["math/smoke"].a.run_ids == ["math-a"] and marks["other/smoke"].mark == "~"
    empty = compare(parse_source(f"code:{repo.commits[-1]}", repo.root), parse_source("HEAD", repo.root))
    assert all(p.mark == "x" and "runs of the code at" in p.reason for p in empty.pairs)
    bad = cli(repo, "compare", "code:", "HEAD")
    assert isinstance(bad.exception, ResultsError)


def test_difference_interval_agrees_with_the_mark(repo: Repo) -> None:
    for pair in compare(parse_source("HEAD~1", repo.root), parse_source("HEAD", repo.root)).pairs:
        assert pair.diff_ci_low is not None and pair.diff_ci_high is not None
        assert (pair.diff_ci_low > 0 or pair.diff_ci_high < 0) == (pair.mark in "+-")
        assert pair.a_paired_pass is not None and pair.b_paired_pass is not None


def test_reproduction_rows_are_not_pooled_into_a_side(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "results")
    record(store, "orig", passes(20, range(5)), started_at="2025-01-01T00:00:00Z")
    record(store, "again", passes(20, range(5)), started_at="2025-01-02T00:00:00Z", note="reproduces orig")
    assert [r.run_id for r in WorktreeSource(store.root).groups()[("math", "smoke")]] == ["orig"]
    named = compare(RunIdsSource(["orig"], store.root), RunIdsSource(["again"], store.root))
    assert named.pairs[0].mark == "~" and named.pairs[0].n_paired_tasks == 20


def test_an_80_column_terminal_gets_one_line_per_run_and_per_pair(repo: Repo) -> None:
    """Below 120 columns `results` prints a line per run (short id, profile, seed, status, before -> after, commit)
    and `compare` a line per pair; `--format wide` keeps the full table."""
    from rich.console import Console

    from harness.results.compare.render import print_comparison, print_runs, short_id

    assert short_id("math-20261203T073813Z-c8c2a1") == "1203T0738-c8c2a1" and short_id("math-a") == "math-a"
    rows = ResultStore(repo.root).runs()
    narrow = Console(width=80, record=True)
    print_runs(rows, "table", narrow)
    lines = narrow.export_text().splitlines()
    assert len(lines) == len(rows) + 1 and all(len(line) <= 80 for line in lines[:-1]), lines
    wide = Console(width=80, record=True)
    print_runs(rows, "wide", wide)
    assert "┃" in wide.export_text()  # the table, folded into 80 columns
    comparison = compare(parse_source("HEAD~1", repo.root), parse_source("HEAD", repo.root))
    narrow = Console(width=80, record=True)
    print_comparison(comparison, "table", narrow)
    text = narrow.export_text()
    assert "┃" not in text and sum(line[:2] in ("+ ", "- ", "~ ", "x ") for line in text.splitlines()) >= len(
        comparison.pairs
    )
