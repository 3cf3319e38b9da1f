"""What a profile can detect, before the money is spent: ``harness power``, the figure on each line of ``harness
validate`` and on a run's set-up, and the run manifest's ``power``.

For a benchmark profile (its evaluation tasks and samples per task) this works out, with the simulation of
:mod:`harness.results.stats.power`:

* the smallest before -> after gain of one run that the paired test over tasks detects (``harness compare
  run:ID@before run:ID@after``: evaluation noise only);
* the smallest gain between the trained models of two sides of :data:`DEFAULT_SEEDS` seeds each that the
  permutation test over seeds detects (``harness compare`` of trained runs: seeds are the units);
* with a target gain: the tasks, the samples per task and the seeds a side it needs.

Its inputs, each stated with where it came from: the base rate is the latest recorded baseline of the profile
(``pass_before``, else ``pass_after`` of an evaluation-only run of the untrained model), else
:data:`~harness.results.stats.power.DEFAULT_BASE_RATE`; the between-seed spread comes from recorded trained runs
of the profile with several seeds (:func:`harness.results.stats.seeds.seed_spread`), else
:data:`~harness.results.stats.power.DEFAULT_SEED_SD`; the task count from the evaluation split when it can be
read without the network (shipped with the benchmark, cached, or from a package), capped by ``evaluation.limit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.assets.data import load_split, readable_offline
from harness.benchmark.protocol import Benchmark
from harness.errors import DataError, ResultsError
from harness.results.stats.power import (
    DEFAULT_BASE_RATE,
    DEFAULT_SEED_SD,
    MAX_SAMPLES,
    MAX_SEEDS,
    MAX_TASKS,
    Detectable,
    PairedDesign,
    PowerModel,
    SeedDesign,
    detectable_gain,
    samples_needed,
    seeds_needed,
    shift_for_gain,
    tasks_needed,
)
from harness.results.stats.seeds import min_p_value, seed_spread
from harness.results.store.manifest import PowerRecord
from harness.results.store.schema import RunRow
from harness.results.store.store import ResultStore
from harness.spec import BenchmarkSpec

DEFAULT_SEEDS = 5
"""Seeds a side for the cross-run figure (5 vs 5: the permutation test's smallest p is 2/252 = 0.0079)."""


@dataclass(frozen=True)
class Sourced:
    """A value and where it came from, in words."""

    value: float
    source: str


def base_rate(rows: Sequence[RunRow], profile: str) -> Sourced:
    """The latest recorded baseline of ``profile``: a run's ``pass_before``, else the pass rate of an
    evaluation-only run of the untrained model; else the default."""
    candidates = [
        r for r in rows if r.profile == profile and r.status == "complete" and not r.note.startswith("reproduces ")
    ]
    for row in sorted(candidates, key=lambda r: r.started, reverse=True):
        if row.pass_before is not None:
            return Sourced(row.pass_before, f"baseline of run {row.run_id}")
        if row.train_steps == 0 and row.pass_after is not None and not row.model_hash_after:
            return Sourced(row.pass_after, f"evaluation-only run {row.run_id}")
    return Sourced(DEFAULT_BASE_RATE, "default: no baseline recorded")


def seed_sd(rows: Sequence[RunRow], profile: str) -> Sourced:
    """The between-seed sd of trained pass rates of ``profile`` from recorded runs, else the default."""
    spread = seed_spread([r for r in rows if r.profile == profile])
    if spread is None:
        return Sourced(DEFAULT_SEED_SD, "default: no profile run with several seeds recorded")
    return Sourced(spread.sd, spread.describe())


def recorded_rows(benchmark: str, root: Path | None = None) -> tuple[list[RunRow], str]:
    """The benchmark's recorded runs, and a note when the tables cannot be read (then there are none)."""
    try:
        return ResultStore(root).runs(benchmark), ""
    except ResultsError as exc:
        return [], f"the results are not read ({exc})"


def task_count(spec: BenchmarkSpec, bench: Benchmark) -> tuple[int | None, str]:
    """The evaluation's task count when its split can be read without the network, else the limit (or None)."""
    ev = spec.evaluation
    if readable_offline(spec.dataset, ev.split):
        try:
            rows, _ = load_split(spec.dataset, ev.split)
        except DataError as exc:
            reason = f"the {ev.split} split is not readable: {exc}"
        else:
            n = len(bench.tasks(rows))
            return (min(n, ev.limit), f"{ev.split} split, limit {ev.limit}") if ev.limit else (n, f"{ev.split} split")
    else:
        reason = f"the {ev.split} split is not fetched yet (harness prepare {spec.name})"
    if ev.limit:
        return ev.limit, f"evaluation.limit ({reason})"
    return None, reason


@dataclass(frozen=True)
class ProfilePower:
    """The figures of one profile and the inputs they assumed."""

    benchmark: str
    profile: str
    tasks: int | None
    tasks_source: str
    samples: int
    model: PowerModel
    base_rate_source: str
    seed_sd_source: str
    seeds: int
    paired: Detectable | None
    across: Detectable | None
    greedy: bool = False
    """Whether the profile samples at temperature 0 (repeated samples of a task then agree)."""

    def record(self) -> PowerRecord | None:
        """The manifest's ``power`` (None when the task count is unknown)."""
        if self.tasks is None or self.paired is None or self.across is None:
            return None
        return PowerRecord(
            detectable_gain=self.paired.gain,
            base_rate=self.model.base_rate,
            base_rate_source=self.base_rate_source,
            tasks=self.tasks,
            samples=self.samples,
            alpha=self.model.alpha,
            power=self.model.power,
            seeds=self.seeds,
            seed_sd=self.model.seed_sd,
            seed_sd_source=self.seed_sd_source,
            detectable_gain_seeds=self.across.gain,
            assumptions=self.model.describe(seeds=True),
        )

    def design(self) -> str:
        """``20 tasks x 8 samples, base rate 18.8% (baseline of run ...)``."""
        tasks = "n tasks unknown" if self.tasks is None else f"{self.tasks} tasks"
        rate = _pct(self.model.base_rate)
        if self.model.p0 != self.model.base_rate:
            rate += f", taken as {_pct(self.model.p0)}"
        return f"{tasks} x {_plural(self.samples, 'sample')}, base rate {rate} ({self.base_rate_source})"

    def line(self, what: str = "before -> after") -> str:
        """One line: the paired figure (what ``harness validate`` and a run print)."""
        if self.tasks is None or self.paired is None:
            return f"detectable gain: n tasks unknown ({self.tasks_source})"
        return f"detects {what} {gain_text(self.paired)} ({self.design()}; {_power_words(self.model)})"

    def lines(self) -> list[str]:
        """Every figure and its assumptions (``harness power``)."""
        head = f"{self.benchmark}/{self.profile}: {self.design()}"
        if self.tasks is None or self.paired is None or self.across is None:
            return [head, f"  n tasks unknown: {self.tasks_source}"]
        test = "exact McNemar" if self.samples == 1 else "sign-flip test over tasks"
        min_p = min_p_value(self.seeds, self.seeds)
        return [
            head,
            f"  one run, before -> after (paired over tasks, {test}; evaluation noise only): "
            f"detects {gain_text(self.paired)}",
            f"  trained runs of two sides, {self.seeds} seeds each (permutation test over seeds, smallest p "
            f"{min_p:.2g}; between-seed sd {100 * self.model.seed_sd:.1f} pp, {self.seed_sd_source}): "
            f"detects {gain_text(self.across)}",
            f"  assumptions: {self.model.describe(seeds=True)}; tasks from the {self.tasks_source}",
        ]

    def needs(self, gain: float) -> list[str]:
        """What a target ``gain`` needs: tasks at this profile's samples, samples at its tasks, seeds a side."""
        model = self.model
        lines = [f"  to detect {100 * gain:+.1f} pp ({_power_words(model)}):"]
        if shift_for_gain(gain, model) is None:
            return [*lines, f"    out of reach: from {_pct(model.p0)} a gain stays below {100 * (1 - model.p0):.1f} pp"]
        tasks = tasks_needed(gain, self.samples, model)
        lines.append(
            f"    before -> after: {_count(tasks, 'task', MAX_TASKS)} at {_plural(self.samples, 'sample')} per task"
        )
        if self.tasks is not None:
            samples = samples_needed(gain, self.tasks, model)
            greedy = " (independent samples: at temperature 0 they agree, raise it first)" if self.greedy else ""
            lines.append(
                f"    before -> after: {_count(samples, 'sample', MAX_SAMPLES)} per task at {self.tasks} tasks"
                + (greedy if samples is None or samples > 1 else "")
            )
            seeds = seeds_needed(gain, self.tasks, self.samples, model)
            lines.append(
                f"    trained runs of two sides: {_count(seeds, 'seed', MAX_SEEDS)} a side at {self.tasks} tasks x "
                f"{_plural(self.samples, 'sample')} (between-seed sd {100 * model.seed_sd:.1f} pp)"
            )
        return lines


def profile_power(
    spec: BenchmarkSpec,
    tasks: int | None,
    rows: Sequence[RunRow],
    *,
    tasks_source: str = "",
    alpha: float = 0.05,
    power: float = 0.8,
    rate: float | None = None,
    seeds: int = DEFAULT_SEEDS,
    model: PowerModel | None = None,
    cross_runs: bool = True,
) -> ProfilePower:
    """The figures of the profile of ``spec`` with ``tasks`` evaluation tasks, from its recorded ``rows`` (without
    ``cross_runs``, only the before -> after one)."""
    found = base_rate(rows, spec.profile) if rate is None else Sourced(rate, "given")
    spread = seed_sd(rows, spec.profile)
    base = model or PowerModel()
    model = replace(base, base_rate=found.value, alpha=alpha, power=power, seed_sd=spread.value)
    samples = spec.evaluation.samples_per_task
    paired = across = None
    if tasks is not None:
        paired = detectable_gain(PairedDesign(tasks, samples), model)
        across = detectable_gain(SeedDesign(seeds, seeds, tasks, samples), model) if cross_runs else None
    return ProfilePower(
        spec.name,
        spec.profile,
        tasks,
        tasks_source or "spec",
        samples,
        model,
        found.source,
        spread.source,
        seeds,
        paired,
        across,
        spec.evaluation.temperature == 0,
    )


# ---------------------------------------------------------------------------------------------- wording


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _count(n: int | None, word: str, limit: int) -> str:
    return f"more than {limit} {word}s" if n is None else _plural(n, word)


def _power_words(model: PowerModel) -> str:
    return f"{100 * model.power:g}% power, alpha {model.alpha:g}"


def gain_text(found: Detectable) -> str:
    """``+12.7 pp``, or why no gain is detectable."""
    return f"{100 * found.gain:+.1f} pp" if found.gain is not None else f"no gain: {found.reason}"
