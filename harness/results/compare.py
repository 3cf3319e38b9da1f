"""Compare two sources (revisions, working tree, runs) benchmark by benchmark, with honest statistics.

Runs are paired by (benchmark, profile). For each side the runs' final-phase outcomes are pooled by task
(:mod:`harness.results.aggregate`); the difference B - A is the mean over the tasks both sides have data for,
with a paired bootstrap CI, and its p-value comes from the exact McNemar test (one sample per task) or the exact
sign-flip permutation test (several). Marks, as in ``asv compare``:

``+`` significant improvement, ``-`` significant regression, ``~`` difference not significant at ``alpha``,
``x`` not comparable (one side missing, or different dataset hash, eval split or task count).

:class:`CompareCommand` is the command object (``run()`` prints and returns the exit code); :func:`compare`
returns the typed :class:`Comparison`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from rich.console import Console

from harness.errors import ResultsError
from harness.results import render
from harness.results.aggregate import TaskCounts, pool
from harness.results.schema import RunRow
from harness.results.sources import Source, comparability_key, parse_source
from harness.results.stats import DEFAULT_SEED, paired_bootstrap, paired_test, pass_hat_k, pass_rate

Mark = Literal["+", "-", "~", "x"]
PASS_HAT_K_MAX = 16
"""pass^k is reported for k up to this (or the smallest per-task trial count, if lower)."""
OutputFormat = Literal["table", "md", "json"]


class SideSummary(BaseModel):
    """One side of one (benchmark, profile) pair."""

    label: str = Field(description="The source's label (revision, worktree or run list).")
    run_ids: list[str] = Field(description="Runs pooled on this side.")
    git_commits: list[str] = Field(description="Distinct git commits of those runs.")
    phases: list[str] = Field(description="Phases used (after when the runs trained, else before).")
    dataset_sha256: str = Field(description="Dataset hash of the runs.")
    eval_split: str = Field(description="Evaluation split of the runs.")
    n_tasks_declared: int = Field(description="n_tasks recorded in the run rows.")
    n_tasks: int = Field(description="Tasks with at least one non-infra sample.")
    n_samples: int = Field(description="Non-infra samples pooled over runs.")
    infra_errors: int = Field(description="Samples excluded as infrastructure errors.")
    tasks_without_data: int = Field(description="Tasks whose every sample was an infrastructure error.")
    pass_rate: float | None = Field(description="Mean over tasks of the task pass fraction.")
    ci_low: float | None = Field(description="Lower CI bound of pass_rate.")
    ci_high: float | None = Field(description="Upper CI bound of pass_rate.")
    ci_method: str = Field(description="wilson (one sample per task) or wilson-design-effect (several).")
    pass_hat_k: dict[int, float] = Field(description="pass^k (tau-bench) for k = 1 .. min(trials per task, 16).")


class PairComparison(BaseModel):
    """The comparison of one (benchmark, profile) between the two sources."""

    benchmark: str = Field(description="Benchmark name.")
    profile: str = Field(description="Spec profile.")
    a: SideSummary | None = Field(description="Side A (None when A has no runs for this pair).")
    b: SideSummary | None = Field(description="Side B (None when B has no runs for this pair).")
    mark: Mark = Field(description="+ improvement, - regression, ~ not significant, x not comparable.")
    reason: str = Field(default="", description="Why the pair is not comparable (mark x).")
    n_paired_tasks: int = Field(default=0, description="Tasks with data on both sides.")
    diff: float | None = Field(default=None, description="Mean over paired tasks of B - A pass fraction.")
    diff_ci_low: float | None = Field(default=None, description="Paired bootstrap CI, lower bound.")
    diff_ci_high: float | None = Field(default=None, description="Paired bootstrap CI, upper bound.")
    p_value: float | None = Field(default=None, description="Two-sided p-value of the paired test.")
    test: str = Field(default="", description="Which paired test produced p_value.")
    new_failures: list[str] = Field(default_factory=list, description="Tasks solved on A but not on B.")
    fixed: list[str] = Field(default_factory=list, description="Tasks solved on B but not on A.")


class Comparison(BaseModel):
    """Result of :func:`compare`."""

    a_label: str = Field(description="Label of side A.")
    b_label: str = Field(description="Label of side B.")
    alpha: float = Field(description="Significance level; CIs are at 1 - alpha.")
    pairs: list[PairComparison] = Field(description="One entry per (benchmark, profile) on either side.")

    @property
    def regressions(self) -> int:
        """Number of significant regressions (mark ``-``)."""
        return sum(p.mark == "-" for p in self.pairs)

    @property
    def improvements(self) -> int:
        """Number of significant improvements (mark ``+``)."""
        return sum(p.mark == "+" for p in self.pairs)


def _side(label: str, rows: Sequence[RunRow], counts: TaskCounts, confidence: float) -> SideSummary:
    first = rows[0]
    rate = pass_rate(counts.successes, counts.trials, confidence) if counts.task_ids else None
    return SideSummary(
        label=label,
        run_ids=[r.run_id for r in rows],
        git_commits=sorted({r.git_commit for r in rows}),
        phases=list(counts.phases),
        dataset_sha256=first.dataset_sha256,
        eval_split=first.eval_split,
        n_tasks_declared=first.n_tasks,
        n_tasks=len(counts.task_ids),
        n_samples=counts.n_samples,
        infra_errors=counts.infra_errors,
        tasks_without_data=counts.tasks_without_data,
        pass_rate=rate.rate if rate else None,
        ci_low=rate.low if rate else None,
        ci_high=rate.high if rate else None,
        ci_method=rate.method if rate else "",
        pass_hat_k=pass_hat_k(counts.successes, counts.trials, PASS_HAT_K_MAX) if counts.task_ids else {},
    )


def _not_comparable_reason(a: RunRow, b: RunRow) -> str:
    fields = ("dataset_sha256", "eval_split", "n_tasks")
    diffs = [
        f"{name} {x!s:.12} vs {y!s:.12}"
        for name, x, y in zip(fields, comparability_key(a), comparability_key(b), strict=True)
        if x != y
    ]
    return "different " + "; ".join(diffs)


@dataclass(frozen=True)
class Side:
    """Input of one side of a pair: a label, where its outcomes are read from, and the runs pooled."""

    label: str
    source: Source
    rows: Sequence[RunRow]


def side_counts(side: Side) -> TaskCounts:
    """Per-task counts of a side's runs (final phases, infra samples excluded)."""
    return pool(side.source.outcome_records(side.rows[0].benchmark, [r.run_id for r in side.rows]))


def compare_pair(
    key: tuple[str, str], a: Side | None, b: Side | None, alpha: float = 0.05, seed: int = DEFAULT_SEED
) -> PairComparison:
    """Compare one (benchmark, profile) between two sides (either may be missing: mark ``x``)."""
    bench, profile = key
    confidence = 1 - alpha
    counts = [None if side is None else side_counts(side) for side in (a, b)]
    summaries = [
        None if side is None or c is None else _side(side.label, side.rows, c, confidence)
        for side, c in zip((a, b), counts, strict=True)
    ]
    result = PairComparison(benchmark=bench, profile=profile, a=summaries[0], b=summaries[1], mark="x")
    if a is None or b is None:
        result.reason = f"no complete runs on side {'A' if a is None else 'B'}"
        return result
    if comparability_key(a.rows[0]) != comparability_key(b.rows[0]):
        result.reason = _not_comparable_reason(a.rows[0], b.rows[0])
        return result
    ca, cb = counts
    assert ca is not None and cb is not None
    common = sorted(set(ca.task_ids) & set(cb.task_ids))
    if not common:
        result.reason = "no task has data on both sides"
        return result
    pa, pb = ca.select(common), cb.select(common)
    diff = paired_bootstrap(pa.means, pb.means, confidence=confidence, seed=seed)
    test = paired_test(pa.successes, pa.trials, pb.successes, pb.trials)
    significant = test.p_value < alpha and diff.diff != 0
    result.mark = ("+" if diff.diff > 0 else "-") if significant else "~"
    result.n_paired_tasks = len(common)
    result.diff, result.diff_ci_low, result.diff_ci_high = diff.diff, diff.low, diff.high
    result.p_value, result.test = test.p_value, test.method
    solved_a, solved_b = pa.solved(), pb.solved()
    result.new_failures = sorted(solved_a - solved_b)
    result.fixed = sorted(solved_b - solved_a)
    return result


def compare(
    a: Source, b: Source, *, benchmark: str | None = None, alpha: float = 0.05, seed: int = DEFAULT_SEED
) -> Comparison:
    """Compare every (benchmark, profile) present on either side."""
    if not 0 < alpha < 1:
        raise ResultsError(f"alpha must be between 0 and 1, got {alpha}")
    groups_a, groups_b = a.groups(benchmark), b.groups(benchmark)
    if benchmark is not None and not groups_a and not groups_b:
        raise ResultsError(f"no complete runs of benchmark {benchmark!r} on either side ({a.label}, {b.label})")
    pairs = [
        compare_pair(
            key,
            Side(a.label, a, groups_a[key]) if key in groups_a else None,
            Side(b.label, b, groups_b[key]) if key in groups_b else None,
            alpha,
            seed,
        )
        for key in sorted(set(groups_a) | set(groups_b))
    ]
    return Comparison(a_label=a.label, b_label=b.label, alpha=alpha, pairs=pairs)


@dataclass
class CompareCommand:
    """``harness compare A B``: parse both sources, compare, print in ``fmt``, return the exit code.

    Exit code 1 when ``fail_on_regression`` and a significant regression was found, else 0. User errors raise
    :class:`~harness.errors.ResultsError` (the CLI turns them into exit code 2).
    """

    a: str
    b: str
    benchmark: str | None = None
    fmt: OutputFormat = "table"
    fail_on_regression: bool = False
    alpha: float = 0.05
    root: Path | None = None

    def comparison(self) -> Comparison:
        """The comparison, without printing."""
        return compare(
            parse_source(self.a, self.root), parse_source(self.b, self.root), benchmark=self.benchmark, alpha=self.alpha
        )

    def run(self, console: Console | None = None) -> int:
        """Compare, print, and return the exit code."""
        result = self.comparison()
        render.print_comparison(result, self.fmt, console)
        return 1 if self.fail_on_regression and result.regressions else 0
