"""Compare two sources (revisions, working tree, runs) benchmark by benchmark, with honest statistics.

Runs are paired by (benchmark, profile). For each side the runs' final-phase outcomes are pooled by task
(:mod:`harness.results.stats.aggregate`) and summarised over that side's own tasks
(:mod:`harness.results.stats.summary`); the difference B - A is the mean over the tasks both sides have data for,
its p-value comes from the exact McNemar test (one sample per task) or the sign-flip permutation test (several:
exact while its work is small, else Monte Carlo; :func:`harness.results.stats.estimators.sign_flip_test`), and its
interval inverts
that test (:mod:`harness.results.stats.paired`), so the interval excludes 0 exactly when the mark is ``+`` or ``-``.
Marks, as in ``asv compare``:

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

import numpy as np
from rich.console import Console

from harness.errors import ResultsError
from harness.results.compare import render, units
from harness.results.compare.model import Comparison, Mark, PairComparison, SideSummary
from harness.results.stats.aggregate import TaskCounts, pool
from harness.results.stats.estimators import DEFAULT_SEED
from harness.results.stats.paired import paired_difference
from harness.results.stats.summary import summarize_counts
from harness.results.store.codec import OutcomeRecords
from harness.results.store.schema import RunRow
from harness.results.store.sources import Source, comparability_key, parse_source

OutputFormat = Literal["table", "wide", "md", "json"]


def _side(label: str, rows: Sequence[RunRow], counts: TaskCounts, confidence: float) -> SideSummary:
    first = rows[0]
    summary = summarize_counts(counts, confidence)
    return SideSummary(
        label=label,
        run_ids=[r.run_id for r in rows],
        git_commits=sorted({r.git_commit for r in rows}),
        phases=list(counts.phases),
        dataset_sha256=first.dataset_sha256,
        eval_split=first.eval_split,
        n_tasks_declared=first.n_tasks,
        n_tasks=summary.n_tasks,
        n_samples=summary.n_samples,
        infra_errors=summary.infra_errors,
        tasks_without_data=summary.tasks_without_data,
        pass_rate=summary.pass_rate,
        ci_low=summary.ci[0] if summary.ci else None,
        ci_high=summary.ci[1] if summary.ci else None,
        ci_method=summary.ci_method,
        pass_hat_k=summary.pass_hat_k,
    )


def _not_comparable_reason(a: RunRow, b: RunRow) -> str:
    fields = ("dataset_sha256", "eval_split", "n_tasks", "benchmark_version")
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


def side_records(side: Side) -> OutcomeRecords:
    """The outcomes of a side's runs."""
    return side.source.outcome_records(side.rows[0].benchmark, [r.run_id for r in side.rows])


def side_counts(side: Side, records: OutcomeRecords | None = None) -> TaskCounts:
    """Per-task counts of a side's runs (final phases, or the source's phase; infra samples excluded)."""
    counts = pool(side_records(side) if records is None else records, side.source.phase)
    if side.source.phase is not None and not counts.task_ids:
        raise ResultsError(f"{side.label}: the run(s) have no {side.source.phase} outcomes")
    return counts


def _incomplete_warnings(side_name: str, rows: Sequence[RunRow]) -> list[str]:
    out = []
    for row in rows:
        if row.status != "complete":
            where = f" in phase {row.failed_phase}" if row.failed_phase else ""
            out.append(f"side {side_name}: run {row.run_id} is {row.status}{where}; its outcomes are partial")
    return out


def compare_pair(
    key: tuple[str, str],
    a: Side | None,
    b: Side | None,
    alpha: float = 0.05,
    seed: int = DEFAULT_SEED,
    missing: tuple[str, str] = ("", ""),
) -> PairComparison:
    """Compare one (benchmark, profile) between two sides (either may be missing: mark ``x``).

    ``missing`` holds, for sides A and B, the sentence saying why a missing side has no runs.
    """
    bench, profile = key
    confidence = 1 - alpha
    records = [None if side is None else side_records(side) for side in (a, b)]
    counts = [None if side is None else side_counts(side, r) for side, r in zip((a, b), records, strict=True)]
    summaries = [
        None if side is None or c is None else _side(side.label, side.rows, c, confidence)
        for side, c in zip((a, b), counts, strict=True)
    ]
    result = PairComparison(benchmark=bench, profile=profile, a=summaries[0], b=summaries[1], mark="x")
    for name, side in (("A", a), ("B", b)):
        if side is not None:
            result.warnings += _incomplete_warnings(name, side.rows)
    if a is None or b is None:
        result.reason = missing[0 if a is None else 1] or f"no complete runs of {bench}/{profile} on side " + (
            "A" if a is None else "B"
        )
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
    paired = paired_difference(pa.successes, pa.trials, pb.successes, pb.trials, alpha, seed)
    result.n_paired_tasks = len(common)
    result.diff, result.diff_ci_low, result.diff_ci_high = paired.diff, paired.low, paired.high
    result.diff_ci_method = paired.interval
    result.a_paired_pass, result.b_paired_pass = float(pa.means.mean()), float(pb.means.mean())
    result.p_value, result.test = paired.p_value, paired.test
    result.task_p_value = paired.p_value
    if units.paired_seeds(a.rows, b.rows, ca, cb):
        ra, rb = records
        assert ra is not None and rb is not None
        _by_paired_seeds(result, a, b, ra, rb, alpha)
    elif units.seed_units(a.rows, b.rows, ca, cb):
        ra, rb = records
        assert ra is not None and rb is not None
        _by_seeds(result, a, b, ra, rb, alpha)
    else:
        result.mark = _mark(paired.p_value, paired.diff, alpha)
        if result.mark == "~":
            samples = max(1, int(np.median(np.minimum(pa.trials, pb.trials))))
            base = result.a_paired_pass
            _undetected(result, units.undetected_tasks(len(common), samples, base, alpha))
    solved_a, solved_b = pa.solved(), pb.solved()
    result.new_failures = sorted(solved_a - solved_b)
    result.fixed = sorted(solved_b - solved_a)
    return result


def _mark(p_value: float, diff: float, alpha: float) -> Mark:
    return ("+" if diff > 0 else "-") if p_value < alpha and diff != 0 else "~"


def _undetected(result: PairComparison, found: units.Undetected) -> None:
    seeds = result.units == "seeds"
    result.detectable_gain, result.detectable_note = found.found.gain, found.note(seeds)
    result.power_assumptions = found.model.describe(seeds)
    if seeds:
        result.seed_sd, result.seeds_needed = found.model.seed_sd, found.seeds_needed


def _by_seeds(result: PairComparison, a: Side, b: Side, ra: OutcomeRecords, rb: OutcomeRecords, alpha: float) -> None:
    """The pair's test over training seeds (:mod:`harness.results.compare.units`) replaces the one over tasks."""
    seeds = units.compare_seeds(
        units.per_seed(a.rows, ra, a.source.phase), units.per_seed(b.rows, rb, b.source.phase), alpha
    )
    result.units = "seeds"
    result.seeds_a, result.seeds_b = len({r.seed for r in a.rows}), len({r.seed for r in b.rows})
    if seeds is None:
        result.mark, result.reason = "x", "no task has data in every seed of both sides"
        return
    result.diff, result.p_value, result.test = seeds.test.diff, seeds.test.p_value, seeds.test.method
    result.min_p_value = seeds.test.min_p
    result.diff_ci_low, result.diff_ci_high = seeds.interval if seeds.interval else (None, None)
    result.diff_ci_method = "permutation test over seeds, inverted" if seeds.interval else "none: too few seeds"
    result.mark = _mark(seeds.test.p_value, seeds.test.diff, alpha)
    if result.mark == "~":
        recorded = [r for r in a.source.runs(a.rows[0].benchmark) if r.profile == a.rows[0].profile]
        _undetected(result, units.undetected_seeds(seeds, recorded, alpha))


def _by_paired_seeds(
    result: PairComparison, a: Side, b: Side, ra: OutcomeRecords, rb: OutcomeRecords, alpha: float
) -> None:
    """The same runs of several seeds in two phases: the t-test over each seed's gain replaces the one over tasks."""
    found = units.compare_paired_seeds(
        units.per_seed(a.rows, ra, a.source.phase), units.per_seed(b.rows, rb, b.source.phase), alpha
    )
    result.units = "seed pairs"
    result.seeds_a = result.seeds_b = len({r.seed for r in a.rows})
    if found is None:
        result.mark, result.reason = "x", "no task has data in every seed of both sides"
        return
    test = found.test
    result.diff, result.p_value, result.test = test.diff, test.p_value, test.method
    result.diff_ci_low, result.diff_ci_high = test.interval
    result.diff_ci_method = "t interval over the seeds' gains"
    result.seed_gains = list(test.gains)
    result.mark = _mark(test.p_value, test.diff, alpha)
    if result.mark == "~":
        result.seed_sd, result.seeds_needed, result.detectable_gain = test.sd, found.seeds_needed, found.detectable
        gain = "none" if found.detectable is None else f"{100 * found.detectable:+.1f} pp"
        note = f"could not tell below {gain} (80% power; the seeds' gains vary by sd {100 * test.sd:.1f} pp)"
        if found.seeds_needed is not None or abs(test.diff) >= units.MIN_TARGET:
            need = f"more than {units.MAX_SEEDS}" if found.seeds_needed is None else str(found.seeds_needed)
            note += f"; telling {100 * abs(test.diff):.1f} pp needs {need} seeds"
        result.detectable_note = note


def _paired_explicitly(
    a: Source, b: Source, groups_a: dict[tuple[str, str], list[RunRow]], groups_b: dict[tuple[str, str], list[RunRow]]
) -> tuple[dict[tuple[str, str], list[RunRow]], dict[tuple[str, str], list[RunRow]]]:
    """With ``across_profiles``, two sides of named runs, one benchmark and one profile each, are one pair even
    when their profiles differ (a run's baseline against a run of a tuned profile); the pair's profile reads
    ``A-profile vs B-profile``."""
    if not (a.explicit and b.explicit and len(groups_a) == 1 and len(groups_b) == 1):
        return groups_a, groups_b
    ((bench_a, prof_a), rows_a), ((bench_b, prof_b), rows_b) = *groups_a.items(), *groups_b.items()
    if bench_a != bench_b or prof_a == prof_b:
        return groups_a, groups_b
    key = (bench_a, f"{prof_a} vs {prof_b}")
    return {key: rows_a}, {key: rows_b}


def compare(
    a: Source,
    b: Source,
    *,
    benchmark: str | None = None,
    alpha: float = 0.05,
    seed: int = DEFAULT_SEED,
    across_profiles: bool = False,
) -> Comparison:
    """Compare every (benchmark, profile) present on either side."""
    if not 0 < alpha < 1:
        raise ResultsError(f"alpha must be between 0 and 1, got {alpha}")
    groups_a, groups_b = a.groups(benchmark), b.groups(benchmark)
    if across_profiles:
        if not (a.explicit and b.explicit):
            raise ResultsError("--across-profiles pairs runs named by id: give both sides as run:<id>[,<id>...]")
        groups_a, groups_b = _paired_explicitly(a, b, groups_a, groups_b)
    if benchmark is not None and not groups_a and not groups_b:
        raise ResultsError(
            f"no complete runs of benchmark {benchmark!r} on either side ({a.describe()}; {b.describe()})"
        )
    pairs = [
        compare_pair(
            key,
            Side(a.label, a, groups_a[key]) if key in groups_a else None,
            Side(b.label, b, groups_b[key]) if key in groups_b else None,
            alpha,
            seed,
            (a.missing(key, "A") if key not in groups_a else "", b.missing(key, "B") if key not in groups_b else ""),
        )
        for key in sorted(set(groups_a) | set(groups_b))
    ]
    return Comparison(a_label=a.label, b_label=b.label, alpha=alpha, pairs=pairs)


@dataclass
class CompareCommand:
    """``harness compare A B``: parse both sources, compare, print in ``fmt``, return the exit code.

    With ``fail_on_regression`` the exit code is 1 when a significant regression was found, or when a pair could
    not be compared (mark ``x``: a benchmark or profile missing on one side, or its data changed) unless
    ``allow_missing``; else 0. User errors raise :class:`~harness.errors.ResultsError` (the CLI turns them into
    exit code 2).
    """

    a: str
    b: str
    benchmark: str | None = None
    fmt: OutputFormat = "table"
    fail_on_regression: bool = False
    alpha: float = 0.05
    root: Path | None = None
    allow_missing: bool = False
    across_profiles: bool = False

    def comparison(self) -> Comparison:
        """The comparison, without printing."""
        return compare(
            parse_source(self.a, self.root),
            parse_source(self.b, self.root),
            benchmark=self.benchmark,
            alpha=self.alpha,
            across_profiles=self.across_profiles,
        )

    def run(self, console: Console | None = None) -> int:
        """Compare, print, and return the exit code."""
        result = self.comparison()
        render.print_comparison(result, self.fmt, console)
        if not self.fail_on_regression:
            return 0
        failing = result.regressions or (result.not_comparable and not self.allow_missing)
        return 1 if failing else 0
