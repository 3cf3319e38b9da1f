"""The one place a pass rate, its interval and pass^k are computed from per-task counts.

The run row and manifest (:func:`harness.run.state.summarize`), ``harness compare``, ``harness report`` and the
pooled line of ``harness run --seeds N`` all call :func:`summarize_counts`, so a run's recorded interval and
pass^k are exactly what ``harness compare`` prints for that run alone:

* the pass rate is the mean over tasks of each task's pass fraction over its non-infra samples;
* its interval is Wilson over tasks with one sample per task, else the task-clustered (design-effect) Wilson
  interval (:func:`harness.results.stats.estimators.pass_rate`): samples of one task are correlated, so pooling them as
  independent would make the interval too narrow;
* pass^k uses every task with at least one non-infra sample, with its non-infra trials (k up to the smallest
  trial count, at most :data:`PASS_HAT_K_MAX`); a task whose every sample was an infra error has no data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.results.stats.aggregate import TaskCounts
from harness.results.stats.estimators import pass_hat_k, pass_rate

PASS_HAT_K_MAX = 16
"""pass^k is reported for k up to this (or the smallest per-task trial count, if lower)."""


@dataclass(frozen=True)
class RateSummary:
    """Pass rate, interval and pass^k of one set of per-task counts."""

    pass_rate: float | None
    ci: tuple[float, float] | None
    ci_method: str
    n_tasks: int
    n_samples: int
    n_passed: int
    infra_errors: int
    tasks_without_data: int
    pass_hat_k: dict[int, float] = field(default_factory=dict)


def summarize_counts(counts: TaskCounts, confidence: float = 0.95) -> RateSummary:
    """The summary of ``counts`` (``pass_rate`` and ``ci`` are ``None`` when no task has data)."""
    common = {
        "n_tasks": len(counts.task_ids),
        "n_samples": counts.n_samples,
        "n_passed": int(counts.successes.sum()),
        "infra_errors": counts.infra_errors,
        "tasks_without_data": counts.tasks_without_data,
    }
    if not counts.task_ids:
        return RateSummary(pass_rate=None, ci=None, ci_method="", **common)
    rate = pass_rate(counts.successes, counts.trials, confidence)
    return RateSummary(
        pass_rate=rate.rate,
        ci=(rate.low, rate.high),
        ci_method=rate.method,
        pass_hat_k=pass_hat_k(counts.successes, counts.trials, PASS_HAT_K_MAX),
        **common,
    )
