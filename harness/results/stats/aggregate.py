"""Pool the outcomes of one or more runs into per-task success counts.

Each run contributes its *final* phase: ``after`` when the run has after-training outcomes, else ``before``.
Samples with an infrastructure error are dropped (they are not the agent's failures) and counted; a task whose
every sample was lost has no data and is left out. Several runs (seeds) of the same tasks are pooled by task:
their samples add up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from harness.results.store.codec import OutcomeRecords
from harness.results.store.schema import INFRA_ERROR_KINDS

SOLVED_THRESHOLD = 0.5
"""A task counts as solved on a side when more than this fraction of its samples pass (majority)."""


@dataclass(frozen=True)
class TaskCounts:
    """Per-task successes and (non-infra) trials of one side, tasks sorted by id."""

    task_ids: tuple[str, ...]
    successes: NDArray[np.int64]
    trials: NDArray[np.int64]
    infra_errors: int
    tasks_without_data: int
    phases: tuple[str, ...]

    @property
    def means(self) -> NDArray[np.float64]:
        """Pass fraction of each task."""
        return self.successes / self.trials

    @property
    def n_samples(self) -> int:
        """Non-infra samples in total."""
        return int(self.trials.sum())

    def select(self, task_ids: Iterable[str]) -> TaskCounts:
        """The counts of ``task_ids`` only (which must all be present), in that order."""
        index = {t: i for i, t in enumerate(self.task_ids)}
        ids = tuple(task_ids)
        rows = np.array([index[t] for t in ids], dtype=np.int64)
        return TaskCounts(
            ids, self.successes[rows], self.trials[rows], self.infra_errors, self.tasks_without_data, self.phases
        )

    def solved(self) -> set[str]:
        """Tasks solved by majority of samples."""
        return {t for t, m in zip(self.task_ids, self.means, strict=True) if m > SOLVED_THRESHOLD}


def final_phases(records: OutcomeRecords) -> dict[str, str]:
    """For each run in ``records``: ``after`` if it has after-training outcomes, else ``before``."""
    phases = dict.fromkeys(records.run_id, "before")
    phases.update({r: "after" for r, ph in zip(records.run_id, records.phase, strict=True) if ph == "after"})
    return phases


def pool(records: OutcomeRecords, phase: str | None = None) -> TaskCounts:
    """Per-task counts over all runs in ``records``, using each run's final phase (or ``phase`` when given)."""
    chosen = final_phases(records)
    if phase is not None:
        chosen = dict.fromkeys(chosen, phase)
    kept = [
        (task, passed, kind)
        for run_id, ph, task, passed, kind in zip(
            records.run_id, records.phase, records.task_id, records.passed, records.error_kind, strict=True
        )
        if ph == chosen[run_id]
    ]
    return count_samples(kept, tuple(sorted(set(chosen.values()))))


def count_samples(kept: list[tuple[str, bool, str]], phases: tuple[str, ...] = ()) -> TaskCounts:
    """Per-task counts of samples given as ``(task_id, passed, error_kind)``; infra samples are dropped."""
    infra = sum(1 for _, _, kind in kept if kind in INFRA_ERROR_KINDS)
    valid = [(task, passed) for task, passed, kind in kept if kind not in INFRA_ERROR_KINDS] if infra else kept
    trials = Counter(item[0] for item in valid)
    successes = Counter(item[0] for item in valid if item[1])
    ids = tuple(sorted(trials))
    return TaskCounts(
        task_ids=ids,
        successes=np.array([successes[t] for t in ids], dtype=np.int64),
        trials=np.array([trials[t] for t in ids], dtype=np.int64),
        infra_errors=infra,
        tasks_without_data=len({item[0] for item in kept}) - len(ids),
        phases=phases,
    )
