"""What the replicates of a comparison are, and what a ``~`` could have detected.

* **Tasks** when at most one side is a trained model, or both are the same runs: one run's ``@before`` against its
  ``@after`` (one trained model: evaluation noise only), untrained evaluations (evaluation-only runs, ``@before``
  phases), a baseline against a trained run. The paired test over tasks (:mod:`harness.results.stats.paired`).
* **Seeds** when both sides are trained models (the ``after`` phase of runs with ``train_steps`` > 0) of different
  runs: training happened once per seed and shifts every task of its model at once, so the seeds are the
  replicates. Each distinct training seed of a side is one unit (runs of one seed pooled), its pass rate the mean
  over the tasks every unit of both sides has; the two-sample permutation test over those rates
  (:mod:`harness.results.stats.seeds`). With one seed on a side the test cannot reject (its smallest p is 1): the
  pair is ``~`` and says that training variance is not covered, beside the task-level p (evaluation noise only).

A ``~`` pair also says what it could have told: the smallest gain its own test detects with 80% power, simulated
(:mod:`harness.results.stats.power`) at A's pass rate, the pair's tasks, samples per task and seeds; for seeds, the
between-seed spread of the pair's own seeds when a side has several, else of the source's recorded runs of the
profile, else the default; and when the seeds cannot reach significance, the seeds a side the observed difference
would need.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from harness.results.stats.aggregate import TaskCounts, pool
from harness.results.stats.power import (
    DEFAULT_SEED_SD,
    MAX_SEEDS,
    Detectable,
    PairedDesign,
    PowerModel,
    SeedDesign,
    detectable_gain,
    seeds_needed,
)
from harness.results.stats.seeds import (
    PairedSeedTest,
    SeedTest,
    between_seed_sd,
    paired_seed_detectable,
    paired_seed_test,
    paired_seeds_needed,
    permutation_test,
    sampling_variance,
    seed_interval,
    seed_spread,
)
from harness.results.store.codec import OutcomeRecords
from harness.results.store.schema import RunRow

COMPARE_REPS = 500
"""Simulated data sets behind a ``~`` pair's detectable gain (power's Monte Carlo error about 0.018 at 80 %)."""
MIN_TARGET = 0.005
"""Observed differences below this (half a point) get no "seeds needed" figure."""


def trained(rows: Sequence[RunRow], counts: TaskCounts) -> bool:
    """Whether a side stands for trained models: runs that trained, read in their ``after`` phase."""
    return "after" in counts.phases and any(r.train_steps > 0 for r in rows)


def seed_units(a_rows: Sequence[RunRow], b_rows: Sequence[RunRow], a: TaskCounts, b: TaskCounts) -> bool:
    """Whether a pair's replicates are training seeds (both sides trained, and not the same runs)."""
    same = {r.run_id for r in a_rows} == {r.run_id for r in b_rows}
    return trained(a_rows, a) and trained(b_rows, b) and not same


_FIELDS = ("run_id", "phase", "task_id", "sample", "reward", "passed", "error_kind")


def per_seed(rows: Sequence[RunRow], records: OutcomeRecords, phase: str | None) -> list[TaskCounts]:
    """Per-task counts of each distinct training seed of a side (its runs pooled), seeds in order."""
    seed_of = {row.run_id: row.seed for row in rows}
    keep: dict[int, list[int]] = defaultdict(list)
    for i, run in enumerate(records.run_id):  # one pass over the outcomes, however many seeds
        if run in seed_of:
            keep[seed_of[run]].append(i)
    columns = [getattr(records, name) for name in _FIELDS]
    subsets = {seed: OutcomeRecords(*([col[i] for i in idx] for col in columns)) for seed, idx in keep.items()}
    return [pool(subsets.get(seed, OutcomeRecords()), phase) for seed in sorted(set(seed_of.values()))]


@dataclass(frozen=True)
class SeedComparison:
    """The permutation test over seeds of one pair, and what went into it."""

    test: SeedTest
    interval: tuple[float, float] | None
    a_rates: list[float]
    b_rates: list[float]
    tasks: int
    samples: int


def compare_seeds(a: list[TaskCounts], b: list[TaskCounts], alpha: float) -> SeedComparison | None:
    """The seeds' pass rates over the tasks every seed of both sides has, and the test (None: no such task)."""
    units = a + b
    common = sorted(set.intersection(*(set(c.task_ids) for c in units)))
    if not common:
        return None
    selected = [c.select(common) for c in units]
    rates = [float(c.means.mean()) for c in selected]
    a_rates, b_rates = rates[: len(a)], rates[len(a) :]
    test = permutation_test(a_rates, b_rates)
    samples = max(1, int(np.median([np.median(c.trials) for c in selected])))
    return SeedComparison(
        test, seed_interval(a_rates, b_rates, test.p_value, alpha), a_rates, b_rates, len(common), samples
    )


@dataclass(frozen=True)
class Undetected:
    """What a ``~`` pair could have told: its detectable gain, and for seeds the spread and seeds needed."""

    found: Detectable
    model: PowerModel
    seed_sd_source: str = ""
    seeds_needed: int | None = None
    target: float | None = None

    def note(self, seeds: bool) -> str:
        """The note's words: "could not tell below +X pp" or why it could not tell at all."""
        power = f"{100 * self.model.power:g}% power"
        if self.found.gain is not None:
            text = f"could not tell below {100 * self.found.gain:+.1f} pp ({power})"
        else:
            text = f"could not tell: {self.found.reason}"
        if seeds:
            text += f", between-seed sd {100 * self.model.seed_sd:.1f} pp ({self.seed_sd_source})"
            if self.target is not None:
                need = f"more than {MAX_SEEDS}" if self.seeds_needed is None else str(self.seeds_needed)
                text += f"; telling {100 * self.target:.1f} pp needs {need} seeds a side"
        return text


def undetected_tasks(tasks: int, samples: int, base: float, alpha: float) -> Undetected:
    """The detectable gain of the paired test over ``tasks`` tasks x ``samples`` at base rate ``base`` (to the
    percent: the figure is a simulation's, and a comparison of many pairs asks for the same designs again)."""
    return _undetected_tasks(tasks, samples, round(base, 2), alpha)


@functools.lru_cache(maxsize=256)
def _undetected_tasks(tasks: int, samples: int, base: float, alpha: float) -> Undetected:
    model = PowerModel(base_rate=base, alpha=alpha, reps=COMPARE_REPS)
    return Undetected(detectable_gain(PairedDesign(tasks, samples), model), model)


def seed_sd_for(seeds: SeedComparison, recorded: Sequence[RunRow]) -> tuple[float, str]:
    """The between-seed sd: from the pair's own seeds when a side has several, else recorded runs, else default."""
    rates = [seeds.a_rates, seeds.b_rates]
    own = between_seed_sd(rates, sampling_variance(seeds.a_rates + seeds.b_rates, seeds.tasks * seeds.samples))
    if own is not None:
        return own, "from the pair's own seeds"
    spread = seed_spread(recorded)
    if spread is not None:
        return spread.sd, spread.describe()
    return DEFAULT_SEED_SD, "default: no recorded runs of the profile with several seeds"


def undetected_seeds(seeds: SeedComparison, recorded: Sequence[RunRow], alpha: float) -> Undetected:
    """The detectable gain of the permutation test over the pair's seeds, and the seeds its difference needs."""
    sd, source = seed_sd_for(seeds, recorded)
    base = float(np.mean(seeds.a_rates))
    model = PowerModel(base_rate=base, alpha=alpha, seed_sd=sd, reps=COMPARE_REPS)
    design = SeedDesign(len(seeds.a_rates), len(seeds.b_rates), seeds.tasks, seeds.samples)
    found = detectable_gain(design, model, analytic=True)
    target = abs(seeds.test.diff)
    if found.gain is not None or target < MIN_TARGET:
        return Undetected(found, model, source)
    # a loss is sized as the same gain from the lower side's rate
    start = min(base, float(np.mean(seeds.b_rates)))
    needed = seeds_needed(target, seeds.tasks, seeds.samples, replace(model, base_rate=start), analytic=True)
    return Undetected(found, model, source, needed, target)


def paired_seeds(a_rows: Sequence[RunRow], b_rows: Sequence[RunRow], a: TaskCounts, b: TaskCounts) -> bool:
    """Whether a pair is the same runs of several seeds read in two phases, one of them trained
    (``run:IDS@before`` against ``run:IDS@after``): each seed is paired with itself."""
    same = {r.run_id for r in a_rows} == {r.run_id for r in b_rows}
    return same and len({r.seed for r in a_rows}) >= 2 and (trained(a_rows, a) or trained(b_rows, b))


@dataclass(frozen=True)
class PairedSeeds:
    """The paired test over seeds of one pair, and what a ``~`` could have told."""

    test: PairedSeedTest
    tasks: int
    detectable: float | None
    seeds_needed: int | None


def compare_paired_seeds(a: list[TaskCounts], b: list[TaskCounts], alpha: float) -> PairedSeeds | None:
    """Each seed's B - A pass rate over the tasks every seed has in both phases (None: no such task)."""
    common = sorted(set.intersection(*(set(c.task_ids) for c in a + b)))
    if not common:
        return None
    rate = [float(c.select(common).means.mean()) for c in a + b]
    gains = [after - before for before, after in zip(rate[: len(a)], rate[len(a) :], strict=True)]
    test = paired_seed_test(gains, alpha)
    detectable = needed = None
    if test.p_value >= alpha:
        detectable = paired_seed_detectable(len(gains), test.sd, alpha)
        if abs(test.diff) >= MIN_TARGET:
            needed = paired_seeds_needed(test.diff, test.sd, alpha, MAX_SEEDS)
    return PairedSeeds(test, len(common), detectable, needed)
