"""Which phases a run does, reuses or skips, and which model server starts early: decided once, before anything
starts, from the options and what an earlier attempt finished (a pure function: no processes, no files).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

Action = Literal["run", "reuse", "skip"]


@dataclass(frozen=True)
class RunPlan:
    baseline: Action
    """Evaluate the base model ("run"), read an earlier attempt's baseline back ("reuse"), or not at all."""
    train: Action
    """Train ("run"), take an earlier attempt's trained checkpoint ("reuse"), or not at all (evaluation only)."""
    early_server: Literal["before", "after"] | None
    """The evaluation whose model server boots during set-up (while data and model are verified), if any: the
    first evaluation this attempt runs, when it comes before any training."""
    early_server_waits: bool = False
    """The early server boots once the run's user simulator serves, not beside it: on one GPU, two vLLM servers that
    size their caches at the same time each count the other's memory as taken (a policy server starting beside the
    simulator on an H100 found -0.75 GiB for its cache and failed)."""

    def describe(self) -> str:
        return f"baseline {self.baseline}, train {self.train}, eval run"


def plan_run(
    *, eval_only: bool, skip_baseline: bool, done: Collection[str], trained: bool, simulator_on_gpu: bool = False
) -> RunPlan:
    """The plan of one attempt. ``done``: phases an earlier attempt finished; ``trained``: its trained checkpoint
    is still there (a finished training whose checkpoint is gone is done again); ``simulator_on_gpu``: the run serves
    a user simulator on this machine's GPUs (:attr:`RunPlan.early_server_waits`)."""
    if eval_only:
        return RunPlan(baseline="skip", train="skip", early_server="after", early_server_waits=simulator_on_gpu)
    if skip_baseline:
        baseline: Action = "skip"
    else:
        baseline = "reuse" if "baseline" in done else "run"
    train: Action = "reuse" if "train" in done and trained else "run"
    early: Literal["before", "after"] | None = "before" if baseline == "run" else None
    return RunPlan(baseline, train, early, early_server_waits=simulator_on_gpu and early is not None)
