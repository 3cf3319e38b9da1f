"""The paired difference B - A over the tasks both sides have: its test and an interval that agrees with it.

The interval excludes 0 exactly when the test's p-value is below ``alpha`` (``harness compare`` marks ``+`` or
``-``), so the table never shows a significant-looking interval next to a ``~``.

* One sample per task on both sides: the exact McNemar test, and an exact interval built from the discordant
  pairs. With ``b`` tasks passed by A only, ``c`` by B only, ``n = b + c`` and ``N`` paired tasks,
  B - A = rho (2 pi - 1) with rho the discordance rate (``n / N``) and pi the share of discordant tasks that B
  passes (``c / n``). pi gets the Clopper-Pearson interval of ``c`` of ``n`` -- it excludes 1/2 exactly when the
  exact McNemar test rejects -- and rho the Clopper-Pearson interval of ``n`` of ``N``; the interval of B - A is
  the range of rho (2 pi - 1) over both (so it widens with the uncertainty of rho, and is never of zero width:
  with no discordant task it is +-(upper bound of rho)).
* Several samples per task: the sign-flip permutation test on the per-task differences (exact while
  :data:`~harness.results.stats.estimators.EXACT_MAX_WORK` allows, else Monte Carlo), and its
  inversion: the shifts delta for which the test of ``d - delta`` does not reject, found by bisection on a grid
  of 1/:data:`GRID` or finer (exact while the work is small, else the test's Monte Carlo with one fixed set of
  random sign flips for every delta). Whether 0 is inside is decided by the test's own p-value. When every task
  has the same difference the test cannot bound it, and the interval is widened by the Clopper-Pearson bound on
  the share of tasks that could differ unseen (then cut at half the difference if the test rejects).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from harness.results.stats.estimators import (
    DEFAULT_SEED,
    EXACT_MAX_WORK,
    PairedTest,
    _as_counts,
    _integer_scale,
    exact_work,
    paired_test,
    sign_flip_exact_p,
)

GRID = 400
"""The multi-sample interval's endpoints are found on a grid of 1/GRID (or finer) of a per-task difference."""
MONTE_CARLO_FLIPS = 20_000


@dataclass(frozen=True)
class PairedResult:
    """B - A over paired tasks: the mean difference, its interval, and the test the interval agrees with."""

    diff: float
    low: float
    high: float
    n_tasks: int
    p_value: float
    test: str
    interval: str


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for ``k`` successes in ``n`` trials (``n >= 1``)."""
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got {k} of {n}")
    alpha = 1 - confidence
    low = 0.0 if k == 0 else float(special.betaincinv(k, n - k + 1, alpha / 2))
    high = 1.0 if k == n else float(special.betaincinv(k + 1, n - k, 1 - alpha / 2))
    return low, high


def discordant_interval(a_only: int, b_only: int, n_tasks: int, confidence: float) -> tuple[float, float]:
    """Exact interval of B - A from the discordant counts (see the module docstring)."""
    n = a_only + b_only
    if n_tasks < 1 or n > n_tasks or a_only < 0 or b_only < 0:
        raise ValueError(f"bad counts: {a_only} + {b_only} discordant of {n_tasks} tasks")
    rho_low, rho_high = clopper_pearson(n, n_tasks, confidence)
    if n == 0:
        return -rho_high, rho_high
    pi_low, pi_high = clopper_pearson(b_only, n, confidence)
    g_low, g_high = 2 * pi_low - 1, 2 * pi_high - 1
    low = rho_high * g_low if g_low < 0 else rho_low * g_low
    high = rho_high * g_high if g_high > 0 else rho_low * g_high
    return max(-1.0, low), min(1.0, high)


def _p_function(diffs: NDArray[np.float64], seed: int) -> tuple[Callable[[int], float], int]:
    """p(k): the sign-flip p-value of ``diffs - k / scale``, and ``scale``."""
    scaled = _integer_scale(diffs)
    if scaled is not None:
        denominator = scaled[1]
        scale = denominator * max(1, math.ceil(GRID / denominator))
        ints = np.rint(diffs * scale).astype(np.int64)
    else:
        scale = 10 * GRID
        ints = np.rint(diffs * scale).astype(np.int64)
    if scaled is not None and exact_work(ints) + scale * ints.size * ints.size <= EXACT_MAX_WORK:

        def exact(k: int) -> float:
            shifted = ints - k
            return sign_flip_exact_p(shifted[shifted != 0])

        return exact, scale
    rng = np.random.default_rng(seed)
    flipped, ones = np.empty(MONTE_CARLO_FLIPS), np.empty(MONTE_CARLO_FLIPS)
    rows = max(1, 2_000_000 // ints.size)
    for start in range(0, MONTE_CARLO_FLIPS, rows):
        stop = min(MONTE_CARLO_FLIPS, start + rows)
        packed = rng.integers(0, 256, size=(stop - start, (ints.size + 7) // 8), dtype=np.uint8)
        signs = 2.0 * np.unpackbits(packed, axis=1, count=ints.size) - 1.0
        flipped[start:stop], ones[start:stop] = signs @ ints.astype(float), signs.sum(axis=1)
    total = float(ints.sum())

    def monte_carlo(k: int) -> float:
        observed = abs(total - k * ints.size)
        hits = int(np.sum(np.abs(flipped - k * ones) >= observed - 1e-9))
        return (hits + 1) / (MONTE_CARLO_FLIPS + 1)

    return monte_carlo, scale


def _bisect(p_at: Callable[[int], float], accepted: int, rejected: int, alpha: float) -> int:
    """The accepted grid point next to the boundary between ``accepted`` and ``rejected``."""
    while abs(accepted - rejected) > 1:
        mid = (accepted + rejected) // 2
        if p_at(mid) >= alpha:
            accepted = mid
        else:
            rejected = mid
    return accepted


def _no_spread_interval(value: float, n_tasks: int, p_zero: float, confidence: float) -> tuple[float, float]:
    """Every task has the same difference: the sign-flip test cannot bound it, so widen by the share of tasks
    whose difference could still differ unseen (Clopper-Pearson upper bound for 0 of ``n_tasks``), then cut at 0
    on the side of ``value`` when the test rejects (so the interval still agrees with it)."""
    reach = clopper_pearson(0, n_tasks, confidence)[1]
    low, high = value - reach, value + reach
    if p_zero >= 1 - confidence:
        return max(-1.0, min(low, 0.0)), min(1.0, max(high, 0.0))
    if value > 0:
        low = max(low, value / 2)
    else:
        high = min(high, value / 2)
    return max(-1.0, low), min(1.0, high)


def sign_flip_interval(
    diffs: ArrayLike, p_zero: float, confidence: float, seed: int = DEFAULT_SEED
) -> tuple[float, float]:
    """The inversion of the sign-flip test for the mean of ``diffs`` (0 inside iff ``p_zero >= alpha``)."""
    d = np.asarray(diffs, dtype=float)
    alpha = 1 - confidence
    if np.all(d == d[0]):
        return _no_spread_interval(float(d[0]), d.size, p_zero, confidence)
    p_raw, scale = _p_function(d, seed)

    def p_at(k: int) -> float:
        return p_zero if k == 0 else p_raw(k)

    mean_units = float(d.mean()) * scale
    low_acc, high_acc = math.floor(mean_units), math.ceil(mean_units)
    ends: list[float] = []
    for acc, outside, toward_zero in ((low_acc, -scale - 1, mean_units > 0), (high_acc, scale + 1, mean_units < 0)):
        if toward_zero and p_zero < alpha:
            outside, acc = 0, max(acc, 1) if outside < 0 else min(acc, -1)
        elif p_at(outside + (1 if outside < 0 else -1)) >= alpha:  # accepted up to the edge of [-1, 1]
            ends.append(-1.0 if outside < 0 else 1.0)
            continue
        ends.append(_bisect(p_at, acc, outside, alpha) / scale)
    low, high = ends
    if p_zero >= alpha:
        low, high = min(low, 0.0), max(high, 0.0)
    return max(-1.0, low), min(1.0, high)


def paired_difference(
    a_successes: ArrayLike,
    a_trials: ArrayLike,
    b_successes: ArrayLike,
    b_trials: ArrayLike,
    alpha: float = 0.05,
    seed: int = DEFAULT_SEED,
) -> PairedResult:
    """Mean of B - A over paired tasks, the paired test, and the interval that inverts it."""
    sa, na = _as_counts(a_successes, a_trials)
    sb, nb = _as_counts(b_successes, b_trials)
    if sa.shape != sb.shape or sa.size == 0:
        raise ValueError("both sides need the same, non-empty tasks")
    diffs = sb / nb - sa / na
    diff = float(diffs.mean())
    test: PairedTest = paired_test(sa, na, sb, nb)
    if np.all(na == 1) and np.all(nb == 1):
        a_only, b_only = int(np.sum((sa == 1) & (sb == 0))), int(np.sum((sa == 0) & (sb == 1)))
        low, high = discordant_interval(a_only, b_only, int(sa.size), 1 - alpha)
        method = "exact (Clopper-Pearson on the discordant tasks)"
    else:
        low, high = sign_flip_interval(diffs, test.p_value, 1 - alpha, seed)
        method = "sign-flip test inversion"
    return PairedResult(diff, min(low, diff), max(high, diff), int(sa.size), test.p_value, test.method, method)
