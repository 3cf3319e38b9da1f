"""The harness's paired tests applied to many simulated data sets at once (for :mod:`harness.results.stats.power`).

Each function takes arrays with one simulated data set per row and returns what the one-at-a-time functions of
:mod:`harness.results.stats.estimators` return for each row (the tests check that they agree):

* :func:`binomial_counts` -- binomial draws by inverting the CDF at given uniforms, so the same uniforms give
  counts that grow with the probability (a power curve from common random numbers);
* :func:`mcnemar_p_values` -- the exact McNemar test (one sample per task);
* :func:`sign_flip_p_values` -- the exact sign-flip test on integer per-task differences: its null distribution's
  characteristic function, prod_t cos(|d_t| theta), inverted by an FFT;
* :func:`paired_p_values` -- the one ``harness compare`` uses for the samples per task, with the sign-flip test's
  normal limit above :data:`EXACT_MAX_UNITS` tasks x samples.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import special

EXACT_MAX_UNITS = 2048
"""tasks x samples up to which the simulated sign-flip test uses its exact null distribution."""


def binomial_counts(p: NDArray[np.float64], u: NDArray[np.float64], samples: int) -> NDArray[np.int64]:
    """Binomial(samples, p) counts by inverting the CDF at ``u``: the same ``u`` gives counts that grow with p."""
    if samples == 1:
        return (u < p).astype(np.int64)
    q = np.clip(p, 1e-12, 1 - 1e-12)
    ratio = q / (1 - q)
    pmf = (1 - q) ** samples
    cdf = pmf.copy()
    counts = np.zeros(p.shape, dtype=np.int64)
    for k in range(samples):  # counts = #{k < samples: P(X <= k) < u}
        counts += cdf < u
        pmf = pmf * ((samples - k) / (k + 1)) * ratio
        cdf = cdf + pmf
    return counts


def mcnemar_p_values(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
    """Exact McNemar p-values of each row of 0/1 outcomes ``a`` (before) and ``b`` (after), shape (reps, tasks)."""
    a_only = np.sum((a == 1) & (b == 0), axis=1)
    b_only = np.sum((a == 0) & (b == 1), axis=1)
    n = a_only + b_only
    p = np.minimum(1.0, 2 * special.bdtr(np.minimum(a_only, b_only), np.maximum(n, 1), 0.5))
    return np.where(n == 0, 1.0, p)


def sign_flip_p_values(ints: NDArray[np.int64]) -> NDArray[np.float64]:
    """Exact two-sided sign-flip p-values of each row of integer differences, shape (reps, tasks).

    The null distribution of the flipped sum has characteristic function prod_t cos(|d_t| theta); it is inverted by
    an FFT of a size above twice the largest possible sum, so nothing wraps around (what
    :func:`~harness.results.stats.estimators.sign_flip_exact_p` computes one row at a time).
    """
    mags = np.abs(ints)
    observed = np.abs(ints.sum(axis=1))
    top = int(mags.sum(axis=1).max(initial=0))
    out = np.ones(ints.shape[0])
    if top == 0:
        return out
    size = 1 << math.ceil(math.log2(2 * top + 2))
    theta = 2 * np.pi * np.arange(size // 2 + 1) / size
    values = np.arange(1, int(mags.max()) + 1)
    cosines = np.cos(values[:, None] * theta[None, :])  # (values, frequencies)
    log_abs = np.log(np.maximum(np.abs(cosines), 1e-300))  # a zero stays a zero once raised to a count >= 1
    negative = (cosines < 0).astype(float)
    rows = max(1, 4_000_000 // size)
    for start in range(0, ints.shape[0], rows):
        stop = min(ints.shape[0], start + rows)
        counts = (mags[start:stop, :, None] == values[None, None, :]).sum(axis=1).astype(float)
        phi = np.exp(counts @ log_abs) * (1 - 2 * np.mod(counts @ negative, 2))  # prod_v cos(v theta) ** count_v
        dist = np.fft.irfft(phi, n=size, axis=1)[:, : size // 2 + 1]  # P(S = s) for s = 0 .. size/2
        tail = np.cumsum(dist[:, ::-1], axis=1)[:, ::-1]  # P(S >= s)
        obs = observed[start:stop]
        p = 2 * tail[np.arange(stop - start), np.minimum(obs, size // 2)]
        out[start:stop] = np.where(obs == 0, 1.0, np.clip(p, 0.0, 1.0))
    return out


def _normal_sign_flip_p_values(ints: NDArray[np.int64]) -> NDArray[np.float64]:
    """The sign-flip test's normal limit: |sum| / sqrt(sum of squares) against the standard normal."""
    scale = np.sqrt(np.sum(ints.astype(float) ** 2, axis=1))
    z = np.abs(ints.sum(axis=1)) / np.where(scale > 0, scale, 1.0)
    return np.where(scale > 0, special.erfc(z / math.sqrt(2)), 1.0)


def paired_p_values(before: NDArray[np.int64], after: NDArray[np.int64], samples: int) -> NDArray[np.float64]:
    """The p-values ``harness compare`` gives each simulated data set (counts of shape (reps, tasks))."""
    if samples == 1:
        return mcnemar_p_values(before, after)
    diffs = after - before
    if before.shape[1] * samples > EXACT_MAX_UNITS:
        return _normal_sign_flip_p_values(diffs)
    return sign_flip_p_values(diffs)
