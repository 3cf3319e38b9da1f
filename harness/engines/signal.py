"""Whether a GRPO step had anything to learn from: the share of groups whose rewards differ.

GRPO's advantage is a sample's reward minus its group's mean (divided by the group's spread): a group whose samples
all got the same reward contributes nothing to the update. A step where no group differs updates nothing, however
many rollouts it ran. Every engine records, per step, from the rewards of its groups (the samples of one task), a
:class:`SignalRecord` (the ``signal`` of the step's :class:`~harness.engines.progress.ProgressRecord`, its fields
beside the step's other metrics in the run's ``train_metrics``):

- ``groups``, ``signal_groups`` and ``signal_share``: how many groups, and how many and the share of them whose
  *training* reward (the task's reward plus the profile's shaping: what the update uses) was not the same for all
  samples;
- ``task_signal_share``: the same for the task's own reward alone (what evaluation scores), so a user sees whether a
  signal comes from the task or only from the shaping;
- ``advantage_abs_mean``: the mean absolute group-normalised advantage of the training reward (0 when no group
  differs);
- ``rollout_reward_std``: the spread of the training reward over all samples of the step.

Before training, :func:`expected_signal_share` gives the share to expect from per-task pass rates: with pass
probability p and n samples a group, 1 - p^n - (1 - p)^n of them differ (for a pass/fail reward).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

EPSILON = 1e-6
"""Added to a group's spread before dividing, as GRPO implementations do."""


def differs(rewards: Sequence[float]) -> bool:
    """Whether a group's rewards are not all the same (a group of one never differs)."""
    return len(rewards) > 1 and max(rewards) - min(rewards) > 1e-12


class SignalRecord(BaseModel):
    """The signal's fields of a step's progress record (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: int
    signal_groups: int
    signal_share: float
    task_signal_share: float
    advantage_abs_mean: float
    rollout_reward_std: float

    def flat(self) -> dict[str, float]:
        """The fields by name, each a number as the run's ``train_metrics`` keep it."""
        return {name: float(value) for name, value in self.model_dump().items()}


@dataclass(frozen=True)
class GroupSignal:
    """The signal of one step's groups."""

    groups: int
    signal_groups: int
    task_signal_groups: int
    advantage_abs_mean: float
    reward_mean: float
    reward_std: float

    @property
    def share(self) -> float:
        return self.signal_groups / self.groups if self.groups else 0.0

    @property
    def task_share(self) -> float:
        return self.task_signal_groups / self.groups if self.groups else 0.0

    def record(self) -> SignalRecord:
        """The step record's fields (see the module's docstring)."""
        return SignalRecord(
            groups=self.groups,
            signal_groups=self.signal_groups,
            signal_share=round(self.share, 6),
            task_signal_share=round(self.task_share, 6),
            advantage_abs_mean=round(self.advantage_abs_mean, 6),
            rollout_reward_std=round(self.reward_std, 6),
        )


def group_signal(training: Mapping[str, Sequence[float]], task: Mapping[str, Sequence[float]]) -> GroupSignal:
    """The signal of one step: ``training`` and ``task`` map each group (a task's samples) to its rewards, the
    training reward (shaped) and the task's own reward, in the same order."""
    advantages: list[float] = []
    for rewards in training.values():
        mean = statistics.fmean(rewards)
        spread = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        advantages += [abs(r - mean) / (spread + EPSILON) if differs(rewards) else 0.0 for r in rewards]
    every = [r for rewards in training.values() for r in rewards]
    return GroupSignal(
        groups=len(training),
        signal_groups=sum(differs(r) for r in training.values()),
        task_signal_groups=sum(differs(r) for r in task.values()),
        advantage_abs_mean=statistics.fmean(advantages) if advantages else 0.0,
        reward_mean=statistics.fmean(every) if every else 0.0,
        reward_std=statistics.pstdev(every) if len(every) > 1 else 0.0,
    )


def expected_signal_share(rates: Iterable[float], n: int) -> float:
    """The share of groups of ``n`` samples expected to differ, for tasks passing with probabilities ``rates``:
    the mean over tasks of 1 - p^n - (1 - p)^n."""
    values = [min(1.0, max(0.0, p)) for p in rates]
    if n < 2 or not values:
        return 0.0
    return statistics.fmean(1.0 - p**n - (1.0 - p) ** n for p in values)


def no_signal_line(records: Sequence[Mapping[str, float]]) -> str | None:
    """ "no training signal: 0 of N groups had differing rewards" when the recorded steps (the run's
    ``train_metrics``) counted groups and none differed; None when some did, or nothing was counted."""
    counted = [r for r in records if "groups" in r]
    if not counted:
        return None
    groups = int(sum(r["groups"] for r in counted))
    if groups == 0 or any(r.get("signal_groups", 0) > 0 for r in counted):
        return None
    return f"no training signal: 0 of {groups} groups had differing rewards"
