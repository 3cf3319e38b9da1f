"""What a run tells its user, as typed events: the runner emits them, a reporter shows them.

The runner only runs (phases, state, the results row); what is said about it, and how, is a
:class:`~harness.run.reporter.Reporter`'s job. Progress bars are not events: they belong to the phase that
advances them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.results.store.manifest import PhaseSummary
from harness.results.store.schema import RunRow


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    benchmark: str
    profile: str
    engine: str
    seed: int
    backend: str
    run_dir: Path
    resumed_from: str | None = None
    done: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataReady:
    """The evaluation tasks and the model, both verified."""

    dataset: str
    split: str
    tasks: int
    sha256: str
    origin: str
    model: str
    model_hash: str
    model_path: Path


@dataclass(frozen=True)
class PowerStated:
    """What the run can detect, worked out before it evaluates; ``unread``: recorded rows that could not be read."""

    line: str
    unread: str = ""


@dataclass(frozen=True)
class SignalForecast:
    """The share of GRPO groups expected to carry a learning signal."""

    line: str


@dataclass(frozen=True)
class EvaluationDone:
    label: str
    summary: PhaseSummary
    server_log: Path | None = None
    """The model server's log, named with its first error when no rollout was scored."""
    reused: bool = False
    """Read back from an earlier attempt of a resumed run."""


@dataclass(frozen=True)
class TrainingReused:
    checkpoint: Path


@dataclass(frozen=True)
class TrainingDone:
    steps: int
    wall_s: float
    model_hash: str


@dataclass(frozen=True)
class ManifestUnwritable:
    """The run folder's manifest could not be written (the results store still has it)."""

    path: Path
    reason: str


@dataclass(frozen=True)
class RowRecorded:
    row: RunRow
    results_file: Path
    eval_only: bool
    evaluated: bool
    """Whether any evaluation finished (a run that failed in set-up has none)."""
    before: PhaseSummary
    after: PhaseSummary
    no_signal: str | None
    """The no-learning-signal finding of the training metrics, if any."""
    profile: str
    shows: str
    """What the profile shows (its spec's ``shows``), said last."""


RunEvent = (
    RunStarted
    | DataReady
    | PowerStated
    | SignalForecast
    | EvaluationDone
    | TrainingReused
    | TrainingDone
    | ManifestUnwritable
    | RowRecorded
)

Emit = Callable[[RunEvent], None]
"""Where a runner sends its events."""
