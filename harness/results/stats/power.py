"""How small a change the harness's own tests detect: power found by simulating those tests (numpy and
scipy.special only, as :mod:`harness.results.stats.estimators`).

Two designs, each simulated with the test ``harness compare`` applies to it:

* **paired over tasks** (one run's model before and after training, or two untrained evaluations): ``tasks`` tasks,
  ``samples`` samples per task on each side; the exact McNemar test when ``samples`` is 1, else the exact sign-flip
  test on the per-task differences (:mod:`harness.results.stats.estimators`);
* **seeds as units** (trained models of different runs): ``n_a`` and ``n_b`` training seeds, each seed's pass rate
  over the same tasks x samples, and the two-sample permutation test over those rates
  (:mod:`harness.results.stats.seeds`).

The model, stated next to every figure (:meth:`PowerModel.describe`):

* task difficulty: each task's pass probability is drawn from Beta(k p0, k (1 - p0)), mean the base rate p0 and
  concentration k (:data:`DEFAULT_CONCENTRATION`: a U-shaped spread, many tasks nearly always or nearly never
  solved, as agent benchmarks have them; a larger k makes tasks more alike);
* the gain: one shift on the logit scale for every task, chosen so that the mean gain over that Beta population
  (and over seed effects, in the cross-run design) equals the target (tasks near 0 or 1 move little; no gain
  reaches 1 - p0);
* samples: independent given the task's probability (binomial counts, drawn by inverting the binomial CDF at
  one uniform per task and side, so that every gain reuses the same random numbers and power grows with the gain);
* seeds (cross-run designs only): each trained model shifts every task's logit by a normal seed effect whose
  scale makes the standard deviation, over seeds, of the expected pass rate equal ``seed_sd`` halfway between the
  two sides (at the base rate shifted by half the gain).

Power at a gain is the share of ``reps`` simulated data sets in which the test rejects at ``alpha`` in the right
direction; the detectable gain is the smallest gain with power >= ``power``, found by bisection on the shift. The
tests run on all simulated data sets at once (:mod:`harness.results.stats.batched`): the sign-flip test's null
distribution is exact while tasks x samples is at most
:data:`~harness.results.stats.batched.EXACT_MAX_UNITS`, and its normal limit above (no profile here comes near).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy import special

from harness.results.stats.batched import binomial_counts, paired_p_values
from harness.results.stats.estimators import DEFAULT_SEED
from harness.results.stats.seeds import labelings, min_p_value, permutation_p_values

DEFAULT_BASE_RATE = 0.3
"""The base rate when the results store has no baseline of the profile."""
DEFAULT_CONCENTRATION = 2.0
"""k of the Beta spread of task difficulty (at p0 = 0.3: Beta(0.6, 1.4))."""
DEFAULT_SEED_SD = 0.05
"""Between-seed standard deviation of a trained model's pass rate when no recorded runs let it be estimated."""
DEFAULT_REPS = 1000
"""Simulated data sets per power figure (power's Monte Carlo standard error at 80 %: 0.013)."""
MIN_RATE = 0.01
"""Base rates are taken as at least this and at most 1 - this (a rate of exactly 0 or 1 has no spread to shift)."""
SIMULATED_MAX_LABELINGS = 2000
"""Relabelings of seeds per simulated test: all of them up to this many, else this many at random."""
MAX_TASKS = 20_000
MAX_SAMPLES = 64
MAX_SEEDS = 30
_QUADRATURE = 2000
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
_HERMITE = (_NODES, _WEIGHTS / _WEIGHTS.sum())
"""Gauss-Hermite nodes and weights of the standard normal (seed effects)."""
_MAX_SHIFT = 30.0
_GAIN_TOLERANCE = 0.0005


@dataclass(frozen=True)
class PowerModel:
    """The stated assumptions of a power figure."""

    base_rate: float = DEFAULT_BASE_RATE
    concentration: float = DEFAULT_CONCENTRATION
    alpha: float = 0.05
    power: float = 0.8
    seed_sd: float = DEFAULT_SEED_SD
    reps: int = DEFAULT_REPS
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        checks = {
            "base_rate": 0 <= self.base_rate <= 1,
            "concentration": self.concentration > 0,
            "alpha": 0 < self.alpha < 1,
            "power": 0 < self.power < 1,
            "seed_sd": 0 <= self.seed_sd < 0.5,
            "reps": self.reps >= 10,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"power model: bad {', '.join(bad)}: {self}")

    @property
    def p0(self) -> float:
        """The base rate used: within [MIN_RATE, 1 - MIN_RATE]."""
        return min(1 - MIN_RATE, max(MIN_RATE, self.base_rate))

    def describe(self, seeds: bool = False) -> str:
        """The assumptions in one sentence (``seeds``: also the seed effect)."""
        a, b = self.concentration * self.p0, self.concentration * (1 - self.p0)
        text = (
            f"{100 * self.power:g}% power at alpha {self.alpha:g} (two-sided), simulated with the test itself "
            f"({self.reps} data sets); task pass probabilities ~ Beta({a:.2g}, {b:.2g}) (mean {100 * self.p0:.1f}%, "
            f"concentration {self.concentration:g}); the gain a logit shift common to all tasks, its mean over "
            "tasks the figure; samples independent given the task"
        )
        if seeds:
            text += (
                f"; each training seed shifts all tasks' logits, between-seed sd {100 * self.seed_sd:.1f} pp of the "
                "pass rate halfway between the sides; the gain averaged over seeds too"
            )
        return text


@dataclass(frozen=True)
class Detectable:
    """The smallest gain a design detects with the model's power, or why none is."""

    gain: float | None
    power_at_gain: float
    reason: str = ""


# ---------------------------------------------------------------------------------------------- the population


@functools.lru_cache(maxsize=64)
def _population(p0: float, concentration: float) -> NDArray[np.float64]:
    """Logits of the Beta quantiles at the midpoints of ``_QUADRATURE`` equal slices (the task population)."""
    u = (np.arange(_QUADRATURE) + 0.5) / _QUADRATURE
    q = special.betaincinv(concentration * p0, concentration * (1 - p0), u)
    return np.asarray(special.logit(np.clip(q, 1e-12, 1 - 1e-12)), dtype=np.float64)


def mean_gain(shift: float, model: PowerModel, seeds: bool = False) -> float:
    """The mean gain over the task population (and, with ``seeds``, over seed effects) of a logit ``shift``."""
    logits = _population(model.p0, model.concentration)
    if not seeds or model.seed_sd <= 0:
        return float(special.expit(logits + shift).mean() - special.expit(logits).mean())
    tau = seed_scale(model.seed_sd, model.p0, model.concentration, round(shift / 2, 3))
    nodes, weights = _HERMITE
    grid = logits[::4][None, :] + tau * nodes[:, None]
    return float(weights @ (special.expit(grid + shift).mean(axis=1) - special.expit(grid).mean(axis=1)))


def shift_for_gain(gain: float, model: PowerModel, seeds: bool = False) -> float | None:
    """The logit shift whose mean gain is ``gain`` (None when the gain is out of reach: at or above 1 - p0)."""
    if gain <= 0:
        return 0.0
    if mean_gain(_MAX_SHIFT, model, seeds) < gain:
        return None
    low, high = 0.0, _MAX_SHIFT
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if mean_gain(mid, model, seeds) < gain else (low, mid)
        if high - low < 1e-6:
            break
    return high


@functools.lru_cache(maxsize=256)
@functools.lru_cache(maxsize=4096)
def seed_scale(seed_sd: float, p0: float, concentration: float, center: float = 0.0) -> float:
    """The logit sd of a seed effect that makes the sd over seeds of the expected pass rate ``seed_sd``, for the
    task population shifted by ``center`` on the logit scale."""
    if seed_sd <= 0:
        return 0.0
    nodes, weights = _HERMITE
    logits = _population(p0, concentration)[::8] + center

    def spread(tau: float) -> float:
        rates = special.expit(logits[None, :] + tau * nodes[:, None]).mean(axis=1)
        mean = float(weights @ rates)
        return math.sqrt(max(0.0, float(weights @ (rates - mean) ** 2)))

    low, high = 0.0, 20.0
    if spread(high) < seed_sd:
        return high
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (mid, high) if spread(mid) < seed_sd else (low, mid)
    return high


# ---------------------------------------------------------------------------------------------- sampling


def _task_logits(rng: np.random.Generator, shape: tuple[int, ...], model: PowerModel) -> NDArray[np.float64]:
    p = rng.beta(model.concentration * model.p0, model.concentration * (1 - model.p0), size=shape)
    return np.asarray(special.logit(np.clip(p, 1e-12, 1 - 1e-12)))


# ---------------------------------------------------------------------------------------------- designs


@dataclass(frozen=True)
class PairedDesign:
    """Tasks x samples per task, before and after, paired over tasks."""

    tasks: int
    samples: int
    seeds: ClassVar[bool] = False

    def min_p(self) -> float:
        """The smallest p-value the test can give: every task moved the same way."""
        return min(1.0, 2 * 0.5**self.tasks)

    def simulator(self, model: PowerModel) -> Callable[[float], tuple[float, float]]:
        """``shift -> (power, share of rejections either way)`` with fixed random numbers."""
        rng = np.random.default_rng(model.seed)
        logits = _task_logits(rng, (model.reps, self.tasks), model)
        u_before, u_after = rng.random((2, model.reps, self.tasks))
        before = binomial_counts(special.expit(logits), u_before, self.samples)

        def run(shift: float) -> tuple[float, float]:
            after = binomial_counts(special.expit(logits + shift), u_after, self.samples)
            reject = paired_p_values(before, after, self.samples) < model.alpha
            better = after.sum(axis=1) > before.sum(axis=1)
            return float(np.mean(reject & better)), float(np.mean(reject))

        return run


NORMAL_RATES_FROM = 30
"""tasks x samples from which a simulated seed's pass rate is its mean plus normal sampling noise (not binomial
draws per task): the test over seeds sees only the seed means."""


@dataclass(frozen=True)
class SeedDesign:
    """``n_a`` seeds against ``n_b`` seeds, each seed's pass rate over the same tasks x samples."""

    n_a: int
    n_b: int
    tasks: int
    samples: int
    seeds: ClassVar[bool] = True

    def min_p(self) -> float:
        """The smallest p-value the permutation test over seeds can give."""
        return min_p_value(self.n_a, self.n_b)

    def simulator(self, model: PowerModel) -> Callable[[float], tuple[float, float]]:
        """``shift -> (power, share of rejections either way)`` with fixed random numbers."""
        rng = np.random.default_rng(model.seed)
        n = self.n_a + self.n_b
        logits = _task_logits(rng, (model.reps, 1, self.tasks), model)
        normals = rng.standard_normal((model.reps, n, 1))
        uniforms = rng.random((model.reps, n, self.tasks))
        noise = rng.standard_normal((model.reps, n))
        side_b = np.arange(n) >= self.n_a
        labels = labelings(self.n_a, self.n_b, rng, SIMULATED_MAX_LABELINGS, SIMULATED_MAX_LABELINGS)

        def run(shift: float) -> tuple[float, float]:
            # the seed spread is seed_sd halfway between the two sides' rates
            tau = seed_scale(model.seed_sd, model.p0, model.concentration, round(shift / 2, 3))
            p = special.expit(logits + tau * normals + shift * side_b[None, :, None])
            if self.tasks * self.samples >= NORMAL_RATES_FROM:
                # a seed's rate over many samples: its mean plus normal sampling noise (the binomial draws' cost
                # without their effect on a test over a handful of seed means)
                mean = p.mean(axis=2)
                spread = np.sqrt((p * (1 - p)).mean(axis=2) / (self.tasks * self.samples))
                rates = mean + spread * noise
            else:
                rates = binomial_counts(p, uniforms, self.samples).mean(axis=2) / self.samples
            reject = permutation_p_values(rates, self.n_a, labels) < model.alpha
            better = rates[:, side_b].mean(axis=1) > rates[:, ~side_b].mean(axis=1)
            return float(np.mean(reject & better)), float(np.mean(reject))

        return run


Design = PairedDesign | SeedDesign


def power_at(design: Design, gain: float, model: PowerModel) -> float:
    """Power of the design's test against a mean gain of ``gain`` (0 when the gain is out of reach)."""
    shift = shift_for_gain(gain, model, design.seeds)
    return 0.0 if shift is None else design.simulator(model)(shift)[0]


def false_positive_rate(design: Design, model: PowerModel) -> float:
    """The share of simulated data sets without any gain in which the test rejects (either way)."""
    return design.simulator(model)(0.0)[1]


ANALYTIC_SEEDS_FROM = 8
"""Seeds a side from which the test over seeds is taken at its normal-theory power (Welch's, with t quantiles): its
permutation distribution is then near-continuous, and simulating it costs seconds per pair."""


def _seed_design_analytic(design: SeedDesign, model: PowerModel) -> Detectable:
    p = model.p0
    sampling = p * (1 - p) / (design.tasks * design.samples)  # at most, since tasks differ in difficulty
    sd = math.sqrt(model.seed_sd**2 + sampling)
    df = design.n_a + design.n_b - 2
    quantiles = float(special.stdtrit(df, 1 - model.alpha / 2) + special.stdtrit(df, model.power))
    gain = float(quantiles * sd * math.sqrt(1 / design.n_a + 1 / design.n_b))
    if gain >= 1 - p:
        return Detectable(None, 0.0, f"no gain below {100 * (1 - p):.0f} pp reaches {100 * model.power:g}% power")
    return Detectable(gain, model.power, "normal theory (many seeds a side)")


def detectable_gain(design: Design, model: PowerModel, analytic: bool = False) -> Detectable:
    """The smallest mean gain the design's test detects with the model's power (bisection on the logit shift). A
    test over seeds is taken at its normal-theory power with many seeds a side, or always with ``analytic`` (what
    ``harness compare`` uses for its notes: milliseconds instead of a simulation per pair)."""
    if isinstance(design, SeedDesign) and (analytic or min(design.n_a, design.n_b) >= ANALYTIC_SEEDS_FROM):
        if design.min_p() >= model.alpha:
            return Detectable(
                None, 0.0, f"the test cannot reach p < {model.alpha:g} (its smallest p is {design.min_p():.3g})"
            )
        return _seed_design_analytic(design, model)
    if design.min_p() >= model.alpha:
        return Detectable(
            None, 0.0, f"the test cannot reach p < {model.alpha:g} (its smallest p is {design.min_p():.3g})"
        )
    run = design.simulator(model)
    top = run(_MAX_SHIFT)[0]
    if top < model.power:
        return Detectable(None, top, f"no gain reaches {100 * model.power:g}% power (at most {100 * top:.0f}%)")
    low, high, at_high = 0.0, _MAX_SHIFT, top
    while mean_gain(high, model, design.seeds) - mean_gain(low, model, design.seeds) > _GAIN_TOLERANCE:
        mid = (low + high) / 2
        power = run(mid)[0]
        if power >= model.power:
            high, at_high = mid, power
        else:
            low = mid
    return Detectable(mean_gain(high, model, design.seeds), at_high)


# ---------------------------------------------------------------------------------------------- what a gain needs


def _smallest(feasible: Callable[[int], bool], start: int, limit: int) -> int | None:
    """The smallest n in [start, limit] with ``feasible(n)`` (assumed monotone): doubling, then bisection."""
    low, high = start - 1, start
    while not feasible(high):
        if high >= limit:
            return None
        low, high = high, min(limit, 2 * high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if feasible(mid) else (mid, high)
    return high


def _reaches(design: Design, shift: float, model: PowerModel) -> bool:
    return design.min_p() < model.alpha and design.simulator(model)(shift)[0] >= model.power


def tasks_needed(gain: float, samples: int, model: PowerModel, limit: int = MAX_TASKS) -> int | None:
    """The fewest tasks (``samples`` each) whose paired test detects ``gain`` with the model's power."""
    shift = shift_for_gain(gain, model)
    if shift is None:
        return None
    start = max(1, math.ceil(math.log2(2 / model.alpha)))  # fewer tasks cannot reach p < alpha
    return _smallest(lambda t: _reaches(PairedDesign(t, samples), shift, model), start, limit)


def samples_needed(gain: float, tasks: int, model: PowerModel, limit: int = MAX_SAMPLES) -> int | None:
    """The fewest samples per task with which ``tasks`` tasks' paired test detects ``gain``."""
    shift = shift_for_gain(gain, model)
    if shift is None or PairedDesign(tasks, 1).min_p() >= model.alpha:
        return None
    return _smallest(lambda s: _reaches(PairedDesign(tasks, s), shift, model), 1, limit)


def seeds_needed(
    gain: float, tasks: int, samples: int, model: PowerModel, limit: int = MAX_SEEDS, analytic: bool = False
) -> int | None:
    """The fewest seeds a side with which the permutation test over seeds detects ``gain`` (``analytic``: by its
    normal-theory power)."""
    if analytic:
        for n in range(2, limit + 1):
            found = detectable_gain(SeedDesign(n, n, tasks, samples), model, analytic=True)
            if found.gain is not None and found.gain <= gain:
                return n
        return None
    shift = shift_for_gain(gain, model, seeds=True)
    if shift is None:
        return None
    return _smallest(lambda n: _reaches(SeedDesign(n, n, tasks, samples), shift, model), 2, limit)
