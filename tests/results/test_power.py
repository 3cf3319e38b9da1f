"""Power by simulation, checked by simulation: the batched tests agree with the one-at-a-time ones `harness compare`
uses, the false-positive rate at the null stays at or below alpha, and data planted at the stated detectable gain,
drawn independently and tested one data set at a time with the harness's own paired test, are detected about 80 %
of the time."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from harness.results.stats import batched
from harness.results.stats.estimators import mcnemar_exact, paired_test, sign_flip_exact_p
from harness.results.stats.power import (
    PairedDesign,
    PowerModel,
    SeedDesign,
    detectable_gain,
    false_positive_rate,
    mean_gain,
    power_at,
    samples_needed,
    shift_for_gain,
    tasks_needed,
)

INDEPENDENT_REPS = 400
"""Independent data sets per check of the power at the detectable gain: its standard error at 80 % is 0.02."""


def test_the_batched_sign_flip_test_is_the_exact_one() -> None:
    rng = np.random.default_rng(7)
    for samples, tasks in ((2, 5), (8, 20), (4, 60)):
        ints = rng.integers(-samples, samples + 1, size=(150, tasks))
        ints[:5] = 0  # no task differs: p = 1
        got = batched.sign_flip_p_values(ints)
        want = np.array([sign_flip_exact_p(row[row != 0]) if row.any() else 1.0 for row in ints])
        assert np.allclose(got, want, atol=1e-12, rtol=0)


def test_the_batched_mcnemar_test_is_the_exact_one() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, 2, size=(2, 300, 15))
    got = batched.mcnemar_p_values(a, b)
    want = [mcnemar_exact(int(np.sum((x == 1) & (y == 0))), int(np.sum((x == 0) & (y == 1)))) for x, y in zip(a, b)]
    assert np.allclose(got, want, atol=1e-12, rtol=0)


def test_binomial_counts_are_binomial_and_grow_with_p() -> None:
    rng = np.random.default_rng(9)
    u = rng.random(200_000)
    for p in (0.03, 0.37, 0.9):
        counts = batched.binomial_counts(np.full(u.size, p), u, 8)
        want = special.comb(8, np.arange(9)) * p ** np.arange(9) * (1 - p) ** (8 - np.arange(9))
        assert np.abs(np.bincount(counts, minlength=9) / u.size - want).max() < 0.005
    low = batched.binomial_counts(np.full(u.size, 0.3), u, 8)
    high = batched.binomial_counts(np.full(u.size, 0.31), u, 8)
    assert np.all(high >= low)


def test_the_gain_is_the_mean_over_the_task_population() -> None:
    model = PowerModel(base_rate=0.2)
    shift = shift_for_gain(0.1, model)
    assert shift is not None and mean_gain(shift, model) == pytest.approx(0.1, abs=1e-6)
    assert shift_for_gain(0.85, model) is None  # beyond 1 - p0 = 0.8
    assert PowerModel(base_rate=0.0).p0 == 0.01  # a measured 0 is taken as 1 %


@pytest.mark.parametrize(("tasks", "samples"), [(20, 1), (100, 1), (20, 8), (40, 4)])
def test_the_false_positive_rate_at_the_null_is_at_most_alpha(tasks: int, samples: int) -> None:
    model = PowerModel(base_rate=0.3, reps=4000, seed=11)
    rate = false_positive_rate(PairedDesign(tasks, samples), model)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000), rate  # within simulation error of alpha


def _independent_power(tasks: int, samples: int, gain: float, model: PowerModel, seed: int) -> float:
    """Data planted at ``gain`` with numpy's own Beta and binomial draws, each set tested by
    :func:`~harness.results.stats.estimators.paired_test` (what `harness compare` runs): the share of rejections."""
    shift = shift_for_gain(gain, model)
    assert shift is not None
    rng = np.random.default_rng(seed)
    a, b = model.concentration * model.p0, model.concentration * (1 - model.p0)
    hits = 0
    for _ in range(INDEPENDENT_REPS):
        p = np.clip(rng.beta(a, b, size=tasks), 1e-12, 1 - 1e-12)
        before = rng.binomial(samples, p)
        after = rng.binomial(samples, special.expit(special.logit(p) + shift))
        trials = np.full(tasks, samples)
        if paired_test(before, trials, after, trials).p_value < model.alpha and after.sum() > before.sum():
            hits += 1
    return hits / INDEPENDENT_REPS


@pytest.mark.parametrize(("tasks", "samples", "base"), [(20, 8, 0.1875), (100, 1, 0.15), (20, 1, 0.3)])
def test_the_stated_detectable_gain_is_detected_about_80_percent_of_the_time(
    tasks: int, samples: int, base: float
) -> None:
    model = PowerModel(base_rate=base)
    found = detectable_gain(PairedDesign(tasks, samples), model)
    assert found.gain is not None and found.power_at_gain >= 0.8
    measured = _independent_power(tasks, samples, found.gain, model, seed=tasks * samples)
    assert 0.72 <= measured <= 0.88, (found.gain, measured)
    # a third of the gain is detected far less often, and the figure is what power_at says
    assert power_at(PairedDesign(tasks, samples), found.gain / 3, model) < 0.4


def test_reference_h200_profile_detects_about_13_points() -> None:
    """The H200 math profile (20 tasks x 8 samples at its 18.75 % baseline) could not have told +3.8 pp."""
    found = detectable_gain(PairedDesign(20, 8), PowerModel(base_rate=0.1875))
    assert found.gain is not None and 0.11 < found.gain < 0.15


def test_too_few_tasks_or_seeds_detect_nothing() -> None:
    model = PowerModel()
    few = detectable_gain(PairedDesign(4, 8), model)  # 2 / 2^4 = 0.125: never below 0.05
    assert few.gain is None and "cannot reach p < 0.05" in few.reason
    seeds = detectable_gain(SeedDesign(3, 3, 20, 8), model)  # 2 / C(6, 3) = 0.1
    assert seeds.gain is None and "smallest p is 0.1" in seeds.reason


def test_what_a_gain_needs_is_the_least_that_reaches_the_power() -> None:
    model = PowerModel(base_rate=0.1875)
    tasks = tasks_needed(0.10, 8, model)
    assert tasks is not None and 20 < tasks < 60
    assert power_at(PairedDesign(tasks, 8), 0.10, model) >= 0.8 > power_at(PairedDesign(tasks - 1, 8), 0.10, model)
    samples = samples_needed(0.10, 20, model)
    assert samples is not None and samples > 8
    assert power_at(PairedDesign(20, samples), 0.10, model) >= 0.8
    assert tasks_needed(0.9, 8, model) is None  # out of reach from 18.75 %
