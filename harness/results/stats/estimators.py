"""Statistics for pass rates of agents: intervals, paired comparisons and pass^k (numpy and scipy.special only).

Conventions. The unit of analysis is the task: a side's pass rate is the mean over tasks of each task's pass
fraction (its non-infra samples), and comparisons pair tasks. With one sample per task everything reduces to the
textbook binomial case.

* :func:`wilson_interval` -- Wilson score interval for k successes in n trials. Never degenerate: all-pass and
  all-fail give a proper one-sided-looking interval, not [1, 1].
* :func:`clustered_interval` -- several samples per task are correlated (a task the agent can solve it solves
  often). The interval uses a Wilson interval at the *effective* sample size n_eff = p(1-p) / Var(p-hat), with
  Var(p-hat) the between-task variance of the task means over T (the cluster-robust variance; Korn & Graubard
  1998). n_eff is T when samples within a task always agree and is capped at the number of samples when they are
  independent (or when every task has the same mean, e.g. all pass), so it reduces to Wilson over tasks or over
  samples at the two extremes.
* :func:`cluster_bootstrap_interval` -- percentile bootstrap over tasks of the mean of task means (the variant
  lm-eval uses for stderr); degenerate on all-pass data, so it is offered, not the default.
* :func:`mcnemar_exact` -- exact McNemar test (binomial on the discordant pairs), one sample per task.
* :func:`sign_flip_test` -- paired permutation test on per-task mean differences: exact (integer dynamic
  programming over the null distribution of the sum) whenever the differences are fractions with small
  denominators, which per-task pass fractions are; Monte Carlo with a fixed seed otherwise.
* :func:`pass_hat_k` -- pass^k as tau-bench defines it.

The interval of a paired difference is in :mod:`harness.results.stats.paired` (it inverts the paired test, so the two
never disagree).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

DEFAULT_SEED = 20240101
DEFAULT_RESAMPLES = 10_000
_CHUNK = 2_000_000  # max elements of one resampling matrix
EXACT_MAX_WORK = 50_000_000  # max (support width x tasks) for the exact sign-flip distribution


@functools.lru_cache(maxsize=32)
def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return float(special.ndtri(0.5 + confidence / 2))


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


@dataclass(frozen=True)
class PassRate:
    """A pass rate with its confidence interval."""

    rate: float
    low: float
    high: float
    n_tasks: int
    n_samples: int
    method: str


@dataclass(frozen=True)
class PairedTest:
    """p-value of a two-sided paired test and the test's name."""

    p_value: float
    method: str


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` out of ``n`` (``n`` may be an effective, non-integer size).

    ``n == 0`` (no data) gives the uninformative ``(0.0, 1.0)``.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    z = _z(confidence)
    p = successes / n
    z2n = z * z / n
    denom = 1 + z2n
    center = (p + z2n / 2) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z2n / (4 * n), 0.0))
    low, high = center - half, center + half
    # exact endpoints at the boundaries (avoid 1e-17 noise)
    if successes == 0:
        low = 0.0
    if successes == n:
        high = 1.0
    return _clip01(low), _clip01(high)


def _as_counts(successes: ArrayLike, trials: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    s = np.asarray(successes, dtype=np.int64)
    n = np.asarray(trials, dtype=np.int64)
    if s.shape != n.shape or s.ndim != 1:
        raise ValueError("successes and trials must be 1-d arrays of the same length")
    if np.any(n < 1) or np.any(s < 0) or np.any(s > n):
        raise ValueError("each task needs trials >= 1 and 0 <= successes <= trials")
    return s, n


def clustered_interval(successes: ArrayLike, trials: ArrayLike, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of task pass fractions and its design-effect Wilson interval: ``(rate, low, high)``."""
    s, n = _as_counts(successes, trials)
    if s.size == 0:
        raise ValueError("no tasks")
    means = s / n
    rate = float(means.mean())
    tasks = means.size
    total = float(n.sum())
    var = float(((means - rate) ** 2).sum()) / (tasks * tasks)
    n_eff = total if var <= 0 else min(total, rate * (1 - rate) / var)
    n_eff = max(n_eff, float(tasks))
    low, high = wilson_interval(rate * n_eff, n_eff, confidence)
    return rate, min(low, rate), max(high, rate)


def cluster_bootstrap_interval(
    task_means: ArrayLike,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``task_means``, resampling tasks."""
    values = np.asarray(task_means, dtype=float)
    if values.size == 0:
        raise ValueError("no tasks")
    means = _bootstrap_means(values, n_resamples, seed)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def pass_rate(successes: ArrayLike, trials: ArrayLike, confidence: float = 0.95) -> PassRate:
    """Pass rate over tasks with its interval: Wilson when every task has one sample, design-effect otherwise."""
    s, n = _as_counts(successes, trials)
    if s.size == 0:
        raise ValueError("no tasks")
    if np.all(n == 1):
        k, tasks = int(s.sum()), int(s.size)
        low, high = wilson_interval(k, tasks, confidence)
        return PassRate(k / tasks, low, high, tasks, tasks, "wilson")
    rate, low, high = clustered_interval(s, n, confidence)
    return PassRate(rate, low, high, int(s.size), int(n.sum()), "wilson-design-effect")


def _bootstrap_means(values: NDArray[np.float64], n_resamples: int, seed: int) -> NDArray[np.float64]:
    """Means of ``n_resamples`` resamples (with replacement) of ``values``; chunked to bound memory."""
    rng = np.random.default_rng(seed)
    size = values.size
    out = np.empty(n_resamples)
    rows = max(1, _CHUNK // size)
    for start in range(0, n_resamples, rows):
        stop = min(n_resamples, start + rows)
        idx = rng.integers(0, size, size=(stop - start, size))
        out[start:stop] = values[idx].mean(axis=1)
    return out


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (A passed only, B passed only)."""
    if a_only < 0 or b_only < 0:
        raise ValueError("counts must be >= 0")
    n = a_only + b_only
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * special.bdtr(min(a_only, b_only), n, 0.5)))


def _integer_scale(d: NDArray[np.float64]) -> tuple[NDArray[np.int64], int] | None:
    """``d`` as integers over a common denominator, when the denominators are small; else ``None``."""
    denominators: list[int] = []
    numerators: list[Fraction] = []
    for x in d:
        frac = Fraction(float(x)).limit_denominator(1000)
        if abs(float(frac) - float(x)) > 1e-9:
            return None
        numerators.append(frac)
        denominators.append(frac.denominator)
    scale = math.lcm(*denominators) if denominators else 1
    ints = np.array([int(f * scale) for f in numerators], dtype=np.int64)
    if exact_work(ints) > EXACT_MAX_WORK:
        return None
    return ints, scale


def sign_flip_exact_p(ints: NDArray[np.int64]) -> float:
    """Exact two-sided sign-flip p-value of integer differences: P(|sum of flipped| >= |observed sum|)."""
    # null distribution of the integer sum, grown one task at a time: support [-partial, +partial]
    dist = np.ones(1)
    for v in np.abs(ints):
        grown = np.zeros(dist.size + 2 * int(v))
        grown[: dist.size] += dist
        grown[2 * int(v) :] += dist
        dist = grown / 2
    span = (dist.size - 1) // 2
    observed = abs(int(ints.sum()))
    support = np.abs(np.arange(-span, span + 1))
    return min(1.0, float(dist[support >= observed].sum()))


def exact_work(ints: NDArray[np.int64]) -> int:
    """Cost of :func:`sign_flip_exact_p` on ``ints`` (support width x tasks)."""
    return int(np.abs(ints).sum()) * int(ints.size)


def sign_flip_test(diffs: ArrayLike, n_resamples: int = 20_000, seed: int = DEFAULT_SEED) -> PairedTest:
    """Two-sided paired permutation test of mean(diffs) == 0, flipping the sign of each task's difference.

    p = P(|sum of sign-flipped diffs| >= |observed sum|) under the 2^n equally likely flips: exact when the diffs
    share a small common denominator, else estimated from ``n_resamples`` random flips as (hits + 1) / (n + 1)
    (Monte Carlo standard error about 0.0015 at p = 0.05 with the default 20,000).
    """
    d = np.asarray(diffs, dtype=float)
    d = d[np.abs(d) > 1e-12]
    if d.size == 0:
        return PairedTest(1.0, "sign-flip exact")
    scaled = _integer_scale(d)
    if scaled is not None:
        return PairedTest(sign_flip_exact_p(scaled[0]), "sign-flip exact")
    # Monte Carlo: sum of flipped diffs = 2 * (diffs where the sign is +) - sum(diffs); signs from random bits
    rng = np.random.default_rng(seed)
    observed_f = abs(float(d.sum()))
    total = float(d.sum())
    hits = 0
    rows = max(1, _CHUNK // d.size)
    for start in range(0, n_resamples, rows):
        count = min(rows, n_resamples - start)
        packed = rng.integers(0, 256, size=(count, (d.size + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=d.size)
        flipped = 2.0 * (bits @ d) - total
        hits += int(np.sum(np.abs(flipped) >= observed_f - 1e-12))
    return PairedTest((hits + 1) / (n_resamples + 1), "sign-flip monte-carlo")


def paired_test(a_successes: ArrayLike, a_trials: ArrayLike, b_successes: ArrayLike, b_trials: ArrayLike) -> PairedTest:
    """Exact McNemar when every paired task has one sample on each side, sign-flip test on task means otherwise."""
    sa, na = _as_counts(a_successes, a_trials)
    sb, nb = _as_counts(b_successes, b_trials)
    if sa.shape != sb.shape:
        raise ValueError("both sides need the same tasks")
    if np.all(na == 1) and np.all(nb == 1):
        a_only = int(np.sum((sa == 1) & (sb == 0)))
        b_only = int(np.sum((sa == 0) & (sb == 1)))
        return PairedTest(mcnemar_exact(a_only, b_only), "mcnemar exact")
    return sign_flip_test(sb / nb - sa / na)


def pass_hat_k(
    successes: Sequence[int] | ArrayLike, trials: Sequence[int] | ArrayLike, max_k: int | None = None
) -> dict[int, float]:
    """pass^k (tau-bench): mean over tasks of C(c, k) / C(n, k), for k = 1 .. the smallest trial count.

    The chance that k i.i.d. attempts at a task all succeed, estimated without bias from c successes in n trials.
    ``max_k`` caps k (pooling many seeds makes n large, and pass^k for k in the hundreds says little).
    """
    s, n = _as_counts(successes, trials)
    if s.size == 0:
        return {}
    k_max = int(n.min()) if max_k is None else min(int(n.min()), max_k)
    return {
        k: float(np.mean([math.comb(int(c), k) / math.comb(int(t), k) for c, t in zip(s, n, strict=True)]))
        for k in range(1, k_max + 1)
    }
