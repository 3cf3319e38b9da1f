"""Statistics checked against independent references: scipy, statsmodels, brute-force enumeration, hand values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from harness.results.stats import estimators as stats

WILSON_CASES = [(0, 1), (1, 1), (0, 50), (50, 50), (45, 50), (20, 50), (1, 2), (7, 13), (999, 1000), (3, 1000)]


@pytest.mark.parametrize(("k", "n"), WILSON_CASES)
def test_wilson_matches_statsmodels(k: int, n: int) -> None:
    low, high = stats.wilson_interval(k, n)
    ref_low, ref_high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.99])
def test_wilson_other_levels_match_statsmodels(confidence: float) -> None:
    low, high = stats.wilson_interval(17, 40, confidence)
    ref = proportion_confint(17, 40, alpha=1 - confidence, method="wilson")
    assert (low, high) == pytest.approx(ref, abs=1e-12)


def test_wilson_no_data_is_uninformative() -> None:
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("successes", "trials", "method"),
    [
        ([1] * 10, [1] * 10, "wilson"),  # all pass
        ([0] * 10, [1] * 10, "wilson"),  # all fail
        ([1], [1], "wilson"),  # one task
        ([0], [1], "wilson"),
        ([3], [3], "wilson-design-effect"),  # one task, several samples
        ([5] * 8, [5] * 8, "wilson-design-effect"),
        ([0] * 8, [5] * 8, "wilson-design-effect"),
    ],
)
def test_pass_rate_edge_cases_have_no_nan(successes: list[int], trials: list[int], method: str) -> None:
    rate = stats.pass_rate(successes, trials)
    assert rate.method == method
    for value in (rate.rate, rate.low, rate.high):
        assert math.isfinite(value)
    assert 0.0 <= rate.low <= rate.rate <= rate.high <= 1.0
    assert rate.high - rate.low > 0  # never a degenerate [1, 1] / [0, 0]


def test_pass_rate_one_sample_is_wilson_over_tasks() -> None:
    rate = stats.pass_rate([1] * 45 + [0] * 5, [1] * 50)
    assert rate.rate == 0.9
    assert (rate.low, rate.high) == pytest.approx(proportion_confint(45, 50, method="wilson"), abs=1e-12)


def test_clustered_interval_with_perfectly_correlated_samples_equals_wilson_over_tasks() -> None:
    # every task either always passes or always fails: 5 samples carry no more information than 1
    successes = [5] * 30 + [0] * 20
    rate, low, high = stats.clustered_interval(successes, [5] * 50)
    assert rate == 0.6
    assert (low, high) == pytest.approx(proportion_confint(30, 50, method="wilson"), abs=1e-12)


def test_clustered_interval_with_uniform_tasks_equals_wilson_over_samples() -> None:
    # every task passes 2 of 4 samples: no between-task variance, n_eff is capped at the 200 samples
    rate, low, high = stats.clustered_interval([2] * 50, [4] * 50)
    assert rate == 0.5
    assert (low, high) == pytest.approx(proportion_confint(100, 200, method="wilson"), abs=1e-12)


def test_clustered_interval_hand_computed_effective_size() -> None:
    successes, trials = np.array([4, 4, 0, 0, 2, 2, 2, 2]), np.array([4] * 8)
    means = successes / trials  # [1,1,0,0,.5,.5,.5,.5], mean .5
    var = np.sum((means - 0.5) ** 2) / 64  # 1/64
    n_eff = 0.25 / var  # 16 (between the 8 tasks and the 32 samples)
    rate, low, high = stats.clustered_interval(successes, trials)
    assert n_eff == 16 and rate == 0.5
    assert (low, high) == pytest.approx(proportion_confint(8, 16, method="wilson"), abs=1e-12)


def test_cluster_bootstrap_interval_reproducible_and_covers_mean() -> None:
    means = np.linspace(0, 1, 40)
    first = stats.cluster_bootstrap_interval(means, seed=7)
    assert first == stats.cluster_bootstrap_interval(means, seed=7)
    assert first[0] < 0.5 < first[1]
    sd = means.std() / math.sqrt(means.size)  # normal approximation as an independent reference
    assert first == pytest.approx((0.5 - 1.96 * sd, 0.5 + 1.96 * sd), abs=0.02)


@pytest.mark.parametrize(
    ("a_only", "b_only"), [(0, 0), (25, 0), (0, 25), (1, 0), (3, 7), (10, 10), (12, 30), (100, 60)]
)
def test_mcnemar_matches_statsmodels_and_binomtest(a_only: int, b_only: int) -> None:
    p = stats.mcnemar_exact(a_only, b_only)
    table = [[5, a_only], [b_only, 7]]
    assert p == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12, abs=1e-15)
    if a_only + b_only:
        assert p == pytest.approx(binomtest(a_only, a_only + b_only, 0.5).pvalue, rel=1e-9, abs=1e-15)
    else:
        assert p == 1.0


def _brute_force_sign_flip(d: list[float]) -> float:
    observed = abs(sum(d))
    hits = sum(
        abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
        for signs in itertools.product((-1, 1), repeat=len(d))
    )
    return hits / 2 ** len(d)


@pytest.mark.parametrize(
    "diffs",
    [
        [0.5, -0.25, 1.0, 0.0, 0.75, 1 / 3, -1 / 3, 0.2],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        [0.0, 0.0, 0.0],
        [0.25],
        [1 / 3, 2 / 3, -1 / 3, 1.0, -2 / 3, 0.0, 1 / 3, 1 / 3, 2 / 3, 1.0, -1.0, 0.5],
        [0.2, 0.4, -0.6, 0.8, 0.2, -0.2, 0.4, 0.6, -0.4, 0.2],
    ],
)
def test_sign_flip_exact_matches_brute_force(diffs: list[float]) -> None:
    result = stats.sign_flip_test(diffs)
    assert result.method == "sign-flip exact"
    assert result.p_value == pytest.approx(_brute_force_sign_flip(diffs), abs=1e-12)


def test_sign_flip_monte_carlo_close_to_brute_force() -> None:
    diffs = [math.pi / k for k in range(1, 13)] + [-math.e / 3, -math.sqrt(2) / 5]  # irrational: no exact path
    result = stats.sign_flip_test(diffs, n_resamples=200_000)
    assert result.method == "sign-flip monte-carlo"
    assert result.p_value == pytest.approx(_brute_force_sign_flip(diffs), abs=0.005)
    assert result == stats.sign_flip_test(diffs, n_resamples=200_000)  # fixed seed


def test_sign_flip_on_binary_diffs_is_mcnemar() -> None:
    a = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)
    b = np.array([0] * 20 + [1] * 5 + [1] * 10 + [0] * 15)
    flip = stats.sign_flip_test(b - a)
    assert flip.p_value == pytest.approx(stats.mcnemar_exact(20, 5), rel=1e-9)


def test_paired_test_chooses_mcnemar_for_one_sample_and_sign_flip_otherwise() -> None:
    one = stats.paired_test([1, 1, 0, 1], [1] * 4, [0, 1, 0, 0], [1] * 4)
    assert one.method == "mcnemar exact"
    assert one.p_value == pytest.approx(mcnemar([[1, 2], [0, 1]], exact=True).pvalue)
    many = stats.paired_test([3, 2, 0], [3, 3, 3], [1, 2, 3], [3, 3, 3])
    assert many.method == "sign-flip exact"
    assert many.p_value == pytest.approx(_brute_force_sign_flip([-2 / 3, 0.0, 1.0]))


def test_pass_hat_k_hand_computed() -> None:
    # task A: 3/4, task B: 1/4, task C: 4/4
    result = stats.pass_hat_k([3, 1, 4], [4, 4, 4])
    assert result[1] == pytest.approx((3 / 4 + 1 / 4 + 1) / 3)
    assert result[2] == pytest.approx((3 / 6 + 0 + 1) / 3)  # C(3,2)/C(4,2) = 3/6
    assert result[3] == pytest.approx((1 / 4 + 0 + 1) / 3)  # C(3,3)/C(4,3) = 1/4
    assert result[4] == pytest.approx((0 + 0 + 1) / 3)
    assert list(result) == [1, 2, 3, 4]


def test_pass_hat_k_edge_cases() -> None:
    assert stats.pass_hat_k([2, 2], [2, 2]) == {1: 1.0, 2: 1.0}  # all pass
    assert stats.pass_hat_k([0, 0], [3, 3]) == {1: 0.0, 2: 0.0, 3: 0.0}  # all fail
    assert stats.pass_hat_k([1], [1]) == {1: 1.0}  # one task, one trial
    assert stats.pass_hat_k([], []) == {}
    assert list(stats.pass_hat_k([1, 2], [2, 3])) == [1, 2]  # k up to the smallest trial count


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1, max_size=30))
def test_pass_rate_is_always_a_proper_interval(tasks: list[tuple[int, int]]) -> None:
    trials = [n for n, _ in tasks]
    successes = [min(k, n) for n, k in tasks]
    rate = stats.pass_rate(successes, trials)
    assert 0.0 <= rate.low <= rate.rate <= rate.high <= 1.0
    assert rate.high > rate.low


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 1 / 3, -2 / 3]), min_size=1, max_size=10))
def test_sign_flip_property_matches_brute_force(diffs: list[float]) -> None:
    assert stats.sign_flip_test(diffs).p_value == pytest.approx(_brute_force_sign_flip(diffs), abs=1e-9)
