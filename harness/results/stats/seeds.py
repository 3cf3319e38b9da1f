"""Training seeds as the units of replication: the test ``harness compare`` uses for trained models of different runs.

Training happened once per seed, so a seed shifts every task of its model at once: tasks are not independent
replicates of a training recipe, seeds are. Each seed's pass rate (over the tasks every seed of both sides has)
is one observation, and:

* :func:`permutation_test` -- the two-sample permutation test of mean(B) - mean(A) over the seeds' pass rates,
  two-sided, exact over all C(n_a + n_b, n_a) relabelings while there are at most :data:`EXACT_MAX_LABELINGS`
  (Monte Carlo from :data:`MONTE_CARLO_LABELINGS` random relabelings with a fixed seed above);
* :func:`min_p_value` -- the smallest p it can give: 2 / C(n, n_a) with equal sides (the most extreme split and
  its mirror), else 1 / C(n, n_a). 1 vs 1 seed: 1; 2 vs 2: 0.33; 3 vs 3: 0.1; 4 vs 4: 0.029; 5 vs 5: 0.0079. So at
  alpha 0.05 it needs 4 seeds a side (or 3 against 5);
* :func:`seed_interval` -- the shifts of B the test accepts: excludes 0 exactly when p < alpha, None when no p
  below alpha is attainable;
* :func:`between_seed_sd` and :func:`seed_spread` -- the standard deviation of a trained model's pass rate over
  seeds, from recorded runs: the pooled variance of the seeds' pass rates within groups of the same resolved spec
  and data, less the sampling variance r (1 - r) / (tasks x samples) each rate has with training fixed.

Seeds are not paired across sides: the same seed number under other code or another profile draws other training
randomness, and a sign-flip over 5 seed pairs could not go below p = 0.0625 anyway. The one pairing that holds is a
run with itself: the same runs read before and after training (``run:IDS@before`` against ``run:IDS@after``, the
pooled line of ``harness run --seeds N``) are tested by :func:`paired_seed_test`, a t-test over the seeds' gains.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from harness.results.stats.estimators import DEFAULT_SEED
from harness.results.store.schema import RunRow

EXACT_MAX_LABELINGS = 200_000
MONTE_CARLO_LABELINGS = 20_000
_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Labelings:
    """Relabelings of n_a + n_b seeds: True marks a seed labelled B (all of them, or a random sample)."""

    matrix: NDArray[np.bool_]
    exact: bool


def labelings(
    n_a: int,
    n_b: int,
    rng: np.random.Generator | None = None,
    limit: int = EXACT_MAX_LABELINGS,
    draws: int = MONTE_CARLO_LABELINGS,
) -> Labelings:
    """Every relabeling when there are at most ``limit``, else ``draws`` random ones."""
    n = n_a + n_b
    if math.comb(n, n_b) <= limit:
        matrix = np.zeros((math.comb(n, n_b), n), dtype=bool)
        for i, chosen in enumerate(itertools.combinations(range(n), n_b)):
            matrix[i, list(chosen)] = True
        return Labelings(matrix, True)
    rng = rng if rng is not None else np.random.default_rng(DEFAULT_SEED)
    keys = rng.random((draws, n))
    order = np.argsort(keys, axis=1)
    matrix = np.zeros((draws, n), dtype=bool)
    np.put_along_axis(matrix, order[:, :n_b], True, axis=1)
    return Labelings(matrix, False)


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value of the exact permutation test with ``n_a`` and ``n_b`` seeds."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a))


def permutation_p_values(rates: NDArray[np.float64], n_a: int, labels: Labelings) -> NDArray[np.float64]:
    """Two-sided permutation p-values of each row of ``rates`` (shape (rows, n_a + n_b): A's seeds, then B's)."""
    n = rates.shape[1]
    n_b = n - n_a
    total = rates.sum(axis=1, keepdims=True)
    scale = 1 / n_b + 1 / n_a
    observed = np.abs(rates[:, n_a:].sum(axis=1) * scale - total[:, 0] / n_a)
    hits = np.zeros(rates.shape[0])
    step = max(1, 4_000_000 // max(1, rates.shape[0]))
    for start in range(0, labels.matrix.shape[0], step):
        block = labels.matrix[start : start + step].T.astype(float)
        stats = np.abs((rates @ block) * scale - total / n_a)
        hits += np.sum(stats >= observed[:, None] - _TOLERANCE, axis=1)
    count = labels.matrix.shape[0]
    return hits / count if labels.exact else (hits + 1) / (count + 1)


@dataclass(frozen=True)
class SeedTest:
    """The permutation test over seeds: B - A of the mean seed pass rates, its p-value, the smallest p possible."""

    diff: float
    p_value: float
    min_p: float
    method: str


def _p(a: NDArray[np.float64], b: NDArray[np.float64], labels: Labelings) -> float:
    return float(permutation_p_values(np.concatenate([a, b])[None, :], a.size, labels)[0])


def permutation_test(a_rates: Sequence[float], b_rates: Sequence[float]) -> SeedTest:
    """Two-sample permutation test of the seeds' pass rates of B against A's."""
    a, b = np.asarray(a_rates, dtype=float), np.asarray(b_rates, dtype=float)
    if a.size < 1 or b.size < 1:
        raise ValueError("each side needs at least one seed")
    labels = labelings(a.size, b.size)
    method = "permutation over seeds " + ("exact" if labels.exact else "monte-carlo")
    return SeedTest(float(b.mean() - a.mean()), _p(a, b, labels), min_p_value(a.size, b.size), method)


def seed_interval(
    a_rates: Sequence[float], b_rates: Sequence[float], p_zero: float, alpha: float
) -> tuple[float, float] | None:
    """The shifts d for which the test of B - d against A does not reject: 0 inside iff ``p_zero >= alpha``.

    None when the test cannot reject at all (too few seeds): every shift would be accepted.
    """
    a, b = np.asarray(a_rates, dtype=float), np.asarray(b_rates, dtype=float)
    if min_p_value(a.size, b.size) >= alpha:
        return None
    labels = labelings(a.size, b.size)
    diff = float(b.mean() - a.mean())

    def accepted(shift: float) -> bool:
        return (p_zero if shift == 0 else _p(a, b - shift, labels)) >= alpha

    ends = []
    for direction in (-1, 1):
        inside = diff
        outside = 0.0 if p_zero < alpha and (diff > 0) == (direction < 0) and diff != 0 else diff + 2 * direction
        for _ in range(40):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if accepted(mid) else (inside, mid)
            if abs(inside - outside) < 1e-5:
                break
        ends.append(inside)
    low, high = ends
    if p_zero >= alpha:
        low, high = min(low, 0.0), max(high, 0.0)
    return max(-1.0, low), min(1.0, high)


# ---------------------------------------------------------------------------------------------- seed spread


def between_seed_sd(groups: Sequence[Sequence[float]], sampling_var: float) -> float | None:
    """sqrt(max(0, pooled within-group variance of seed pass rates - ``sampling_var``)); None without 2 seeds in a
    group."""
    used = [np.asarray(g, dtype=float) for g in groups if len(g) >= 2]
    dof = sum(g.size - 1 for g in used)
    if dof == 0:
        return None
    pooled = sum(float(((g - g.mean()) ** 2).sum()) for g in used) / dof
    return math.sqrt(max(0.0, pooled - sampling_var))


def sampling_variance(rates: Sequence[float], units: int) -> float:
    """The mean over seeds of r (1 - r) / units: a pass rate's variance from sampling alone, training fixed."""
    values = np.asarray(rates, dtype=float)
    return float(np.mean(values * (1 - values))) / max(1, units) if values.size else 0.0


@dataclass(frozen=True)
class SeedSpread:
    """A between-seed standard deviation of pass rates and where it came from."""

    sd: float
    seeds: int
    groups: int
    runs: tuple[str, ...]

    def describe(self) -> str:
        """Where the figure comes from, in words."""
        return f"from {self.seeds} seeds in {self.groups} group(s) of recorded runs"


def seed_spread(rows: Sequence[RunRow]) -> SeedSpread | None:
    """The between-seed sd of the trained pass rates of ``rows`` (one benchmark/profile), grouped by resolved spec
    and data (any commit): complete trained runs, reproductions left out, runs of one seed averaged."""
    groups: dict[tuple[object, ...], dict[int, list[RunRow]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.status != "complete" or row.train_steps == 0 or row.pass_after is None:
            continue
        if row.note.startswith("reproduces "):
            continue
        key = (row.profile, row.spec_hash, row.dataset_sha256, row.eval_split, row.n_tasks, row.benchmark_version)
        groups[key][row.seed].append(row)
    rates: list[list[float]] = []
    variances: list[float] = []
    runs: list[str] = []
    for by_seed in groups.values():
        if len(by_seed) < 2:
            continue
        seed_rates = [float(np.mean([r.pass_after or 0.0 for r in rs])) for rs in by_seed.values()]
        rates.append(seed_rates)
        units = next(iter(by_seed.values()))[0]
        variances.append(sampling_variance(seed_rates, units.n_tasks * max(1, units.samples_per_task)))
        runs += [r.run_id for rs in by_seed.values() for r in rs]
    sd = between_seed_sd(rates, float(np.mean(variances)) if variances else 0.0)
    if sd is None:
        return None
    return SeedSpread(sd, sum(len(g) for g in rates), len(rates), tuple(runs))


# ------------------------------------------------------------------ seeds paired by run: one run read in two phases


@dataclass(frozen=True)
class PairedSeedTest:
    """The t-test over training seeds paired by run: each seed's B - A pass rate, where both sides are the same runs
    read in two phases (``run:IDS@before`` against ``run:IDS@after``).

    The gains are the units: a seed's before and after come from one run, so the pairs are independent replicates of
    the recipe's effect, and a seed's pass rate (a mean over the tasks) is close to normal. A sign-flip test over
    the gains would be exact without that assumption, but its smallest p is 2 / 2^n: 0.0625 with 5 seeds, never
    significant at 0.05 below 6; the t-test can reach it with 2 seeds whose gains nearly agree.
    """

    gains: tuple[float, ...]
    diff: float
    sd: float
    p_value: float
    interval: tuple[float, float]
    method: str = "paired t-test over seeds"


def paired_seed_test(gains: Sequence[float], alpha: float) -> PairedSeedTest:
    """Two-sided one-sample t-test of the seeds' gains against 0, and its 1 - alpha interval."""
    from scipy import stats  # a second's import, only when seeds are compared

    d = np.asarray(gains, dtype=float)
    if d.size < 2:
        raise ValueError("the paired test over seeds needs at least two seeds")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd <= _TOLERANCE:  # every seed gained exactly the same
        return PairedSeedTest(tuple(d.tolist()), mean, 0.0, 1.0 if abs(mean) <= _TOLERANCE else 0.0, (mean, mean))
    se = sd / math.sqrt(d.size)
    p = float(2 * stats.t.sf(abs(mean) / se, d.size - 1))
    half = float(stats.t.ppf(1 - alpha / 2, d.size - 1)) * se
    return PairedSeedTest(tuple(d.tolist()), mean, sd, p, (mean - half, mean + half))


def paired_seed_detectable(n: int, sd: float, alpha: float, power: float = 0.8) -> float | None:
    """The smallest mean gain the paired t-test over ``n`` seeds detects with ``power``, the gains' sd being ``sd``
    (noncentral t). None below two seeds; 0 when the gains do not vary."""
    from scipy import optimize, stats

    if n < 2:
        return None
    if sd <= _TOLERANCE:
        return 0.0
    df = n - 1
    critical = float(stats.t.ppf(1 - alpha / 2, df))

    def shortfall(nc: float) -> float:
        wrong_side = float(np.nan_to_num(stats.nct.cdf(-critical, df, nc)))  # negligible, and NaN where tiny
        return float(stats.nct.sf(critical, df, nc)) + wrong_side - power

    high = 4.0
    while shortfall(high) < 0:  # the noncentral t's tail is finite well past any power asked for
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high)) * sd / math.sqrt(n)


def paired_seeds_needed(gain: float, sd: float, alpha: float, limit: int, power: float = 0.8) -> int | None:
    """The fewest seeds with which the paired t-test detects ``gain`` (None: more than ``limit``)."""
    for n in range(2, limit + 1):
        found = paired_seed_detectable(n, sd, alpha, power)
        if found is not None and found <= abs(gain):
            return n
    return None
