"""The interval of B - A agrees with the paired test; hand-computed and brute-force references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from harness.results.stats import estimators as stats
from harness.results.stats import paired


def test_clopper_pearson_matches_statsmodels() -> None:
    for k, n in [(0, 10), (3, 10), (10, 10), (5, 49), (17, 40)]:
        ours = paired.clopper_pearson(k, n, 0.95)
        theirs = proportion_confint(k, n, alpha=0.05, method="beta")
        assert ours == pytest.approx((float(theirs[0]), float(theirs[1])), abs=1e-12)


def test_five_discordant_tasks_all_for_b_is_not_significant_and_the_interval_says_so() -> None:
    # 49 tasks, B alone passes 5: the exact McNemar p = 2 / 2**5 = 0.0625, so the interval must include 0
    a = [0] * 5 + [1] * 20 + [0] * 24
    b = [1] * 5 + [1] * 20 + [0] * 24
    result = paired.paired_difference(a, [1] * 49, b, [1] * 49)
    assert result.p_value == pytest.approx(0.0625)
    pi_low = 0.025 ** (1 / 5)  # Clopper-Pearson lower bound of 5 of 5 at 95%
    rho_high = float(proportion_confint(5, 49, alpha=0.05, method="beta")[1])
    assert result.low == pytest.approx(rho_high * (2 * pi_low - 1))
    assert result.high == pytest.approx(rho_high)
    assert result.diff == pytest.approx(5 / 49)
    assert result.low < 0 < result.diff < result.high


def test_no_discordant_task_gives_a_proper_interval() -> None:
    result = paired.paired_difference([1, 0, 1, 1], [1] * 4, [1, 0, 1, 1], [1] * 4)
    reach = 1 - 0.025 ** (1 / 4)
    assert (result.diff, result.low, result.high) == pytest.approx((0.0, -reach, reach))


@pytest.mark.parametrize("n_tasks", [6, 25])
def test_single_sample_interval_excludes_zero_exactly_when_mcnemar_rejects(n_tasks: int) -> None:
    for a_only, b_only in itertools.product(range(n_tasks + 1), repeat=2):
        if a_only + b_only > n_tasks:
            continue
        both = n_tasks - a_only - b_only
        a = [1] * a_only + [0] * b_only + [0] * both
        b = [0] * a_only + [1] * b_only + [0] * both
        result = paired.paired_difference(a, [1] * n_tasks, b, [1] * n_tasks, alpha=0.05)
        exact = mcnemar([[0, a_only], [b_only, 0]], exact=True).pvalue if a_only + b_only else 1.0
        assert result.p_value == pytest.approx(exact)
        excludes = result.low > 0 or result.high < 0
        assert excludes == (result.p_value < 0.05), (a_only, b_only, result)
        assert result.low <= result.diff <= result.high
        assert result.high > result.low


def _brute_p(d: np.ndarray) -> float:
    observed = abs(d.sum())
    sums = [abs(float(np.dot(signs, d))) for signs in itertools.product((-1, 1), repeat=d.size)]
    return sum(s >= observed - 1e-9 for s in sums) / 2**d.size


def test_multi_sample_interval_is_the_brute_force_inversion_of_the_sign_flip_test() -> None:
    a_s, b_s = np.array([0, 1, 2, 1, 0, 2, 1, 0]), np.array([2, 2, 2, 1, 1, 2, 2, 1])
    trials = np.full(8, 2)
    result = paired.paired_difference(a_s, trials, b_s, trials)
    d = b_s / 2 - a_s / 2
    assert result.p_value == pytest.approx(_brute_p(d))
    grid = np.arange(-400, 401) / 400
    accepted = [delta for delta in grid if _brute_p(d - delta) >= 0.05]
    assert result.low == pytest.approx(min(accepted))
    assert result.high == pytest.approx(max(accepted))


def test_multi_sample_interval_agrees_with_the_test_on_random_data() -> None:
    rng = np.random.default_rng(5)
    for _ in range(40):
        n_tasks, samples = int(rng.integers(5, 40)), int(rng.integers(2, 5))
        base = rng.random(n_tasks)
        shift = rng.normal(0, 0.15)
        a_s = rng.binomial(samples, base)
        b_s = rng.binomial(samples, np.clip(base + shift, 0, 1))
        trials = np.full(n_tasks, samples)
        result = paired.paired_difference(a_s, trials, b_s, trials)
        assert result.p_value == stats.paired_test(a_s, trials, b_s, trials).p_value
        excludes = result.low > 0 or result.high < 0
        assert excludes == (result.p_value < 0.05), result
        assert result.low <= result.diff <= result.high


def test_equal_differences_do_not_give_a_zero_width_interval() -> None:
    trials = np.full(30, 2)
    same = paired.paired_difference(np.ones(30), trials, np.ones(30), trials)
    assert same.p_value == 1.0 and same.low < 0 < same.high
    shifted = paired.paired_difference(np.zeros(30), trials, np.ones(30), trials)  # every task +0.5
    assert shifted.p_value < 0.05 and 0 < shifted.low < 0.5 < shifted.high
