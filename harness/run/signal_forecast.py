"""Will GRPO have a signal? The share of training groups expected to differ in the task's reward, before training.

A group is one task's ``n`` samples in a step; GRPO learns only from groups whose rewards differ. For a task that
passes with probability p, a group of n samples differs with probability 1 - p^n - (1 - p)^n
(:func:`harness.engines.signal.expected_signal_share`). The pass rates come from the profile's latest recorded
baseline (the run :func:`harness.run.planning.base_rate` picks): per task when it sampled each task at least
twice, else its pooled rate for every task (tasks taken as alike: an upper bound, since the share is concave in p),
else the default base rate. ``harness validate``, ``harness power`` and a run's set-up print it, with a warning
below :data:`THRESHOLD`; each step's measured share is in the run's ``train_metrics`` (``task_signal_share``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.engines import get_engine_class
from harness.engines.signal import expected_signal_share
from harness.errors import ResultsError
from harness.results.store.schema import RunRow
from harness.results.store.store import ResultStore
from harness.run.planning import base_rate
from harness.spec import BenchmarkSpec

THRESHOLD = 0.10
"""Below this expected share of groups with a signal, a run is warned about before it trains."""


@dataclass(frozen=True)
class SignalPrediction:
    share: float
    group_size: int
    source: str

    def line(self) -> str:
        text = (
            f"{100 * self.share:.1f}% of groups of {self.group_size} expected to differ in the task's reward "
            f"({self.source})"
        )
        if self.share < THRESHOLD:
            text += (
                f"; warning: below {100 * THRESHOLD:.0f}%, GRPO would learn little from the task's reward "
                "(more samples a group, easier tasks, or shaping terms)"
            )
        return text


def baseline_rates(rows: Sequence[RunRow], profile: str, root: Path | None = None) -> tuple[list[float], str] | None:
    """Per-task pass rates of the baseline :func:`base_rate` picks, when it sampled every task at least twice."""
    source = base_rate(rows, profile).source
    run_id = source.rsplit(" ", 1)[-1]
    row = next((r for r in rows if r.run_id == run_id), None)
    if row is None:
        return None
    phase = "before" if row.pass_before is not None else "after"
    try:
        outcomes = ResultStore(root).outcomes(row.benchmark, run_id)
    except ResultsError:
        return None
    by_task: dict[str, list[bool]] = defaultdict(list)
    for o in outcomes:
        if o.phase == phase and o.error_kind not in ("infra", "timeout"):
            by_task[o.task_id].append(bool(o.passed))
    if not by_task or min(len(v) for v in by_task.values()) < 2:
        return None
    samples = min(len(v) for v in by_task.values())
    rates = [sum(v) / len(v) for v in by_task.values()]
    return rates, f"per-task pass rates of {len(rates)} tasks x {samples}+ samples, {source}"


def predict_signal(spec: BenchmarkSpec, rows: Sequence[RunRow], root: Path | None = None) -> SignalPrediction | None:
    """The expected share for the profile of ``spec`` (None when it does not train, or its engine has no groups)."""
    if not spec.trains:
        return None
    n = get_engine_class(spec.training.engine).group_size(spec)
    if n is None:
        return None
    per_task = baseline_rates(rows, spec.profile, root)
    if per_task is not None:
        rates, source = per_task
        return SignalPrediction(expected_signal_share(rates, n), n, source)
    pooled = base_rate(rows, spec.profile)
    source = f"pass rate {100 * pooled.value:.1f}% for every task, {pooled.source}: an upper bound"
    return SignalPrediction(expected_signal_share([pooled.value], n), n, source)
