"""A trainer's progress: one :class:`ProgressRecord` per step, from the worker process to its engine.

A worker prints each record as one stdout line, :data:`PROGRESS_PREFIX` and the record's JSON
(:func:`progress_line`); :func:`harness.engines.child.run_trainer` reads it back (:func:`read_progress`) and hands
it to the engine and the run's progress bar. ``trace-grpo`` builds the same records in the harness process, one per
step. The run keeps each record flat (:meth:`ProgressRecord.flat`) in its ``train_metrics``.

A record carries ``schema_version`` and is read through :class:`harness.records.Versions`. Its lines are read only
by the run whose trainer printed them, so a line without a version or of another version is refused, as is a line
that is not a valid record: a one-line :class:`EngineError` naming the trainer's log.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.engines.signal import SignalRecord
from harness.errors import EngineError
from harness.records import Versions

PROGRESS_PREFIX = "HARNESS_PROGRESS "
"""A worker's stdout line that starts with this is one progress record."""

PROGRESS_VERSIONS = Versions("progress record", 1, error=EngineError)


class ProgressRecord(BaseModel):
    """One step of a trainer: the harness's own figures by name, the step's GRPO signal, and the trainer's further
    metrics (``trl-grpo``: every number TRL logs). A figure the trainer does not report is None."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    schema_version: Literal[1] = 1
    step: int = 0
    """The optimizer step, from 1; 0 for a record of no training step (``verl``'s validation before training, the
    report of one ``trace-grpo`` update)."""
    step_time_s: float | None = None
    reward_mean: float | None = None
    """The mean training reward of the step's rollouts (the task's reward plus the profile's shaping)."""
    task_reward_mean: float | None = None
    """``trace-grpo``: the mean of the task's own reward."""
    loss: float | None = None
    grad_norm: float | None = None
    response_length_mean: float | None = None
    """Mean tokens of a response: ``verl`` a rollout's, ``trace-grpo`` a traced call's."""
    tokens: int | None = None
    """``trace-grpo``: the tokens of the update's forward passes (prompts and completions)."""
    tokens_total: float | None = None
    """``verl``: the tokens of the step."""
    tokens_per_s: float | None = None
    tokens_per_s_per_gpu: float | None = None
    update_s: float | None = None
    """``trace-grpo``: the wall time of the update's worker."""
    rollouts: int | None = None
    """``trace-grpo``: the step's rollouts (infrastructure failures not counted)."""
    infra_errors: int | None = None
    traced_calls: int | None = None
    triplets: int | None = None
    """``trace-grpo``: the (prompt, completion, advantage) triplets the update trained on."""
    val_pass_rate: float | None = None
    """``verl``: the pass rate of the validation run at this step."""
    val_reward_mean: float | None = None
    signal: SignalRecord | None = None
    """The step's GRPO signal (:mod:`harness.engines.signal`); None where the trainer counted no groups."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """The trainer's further metrics by name, as it logs them (``/`` written as ``_``)."""

    def flat(self) -> dict[str, float]:
        """The record as the run keeps it (``train_metrics``, ``trace-grpo``'s ``metrics.jsonl``, TensorBoard): one
        number by name, the trainer's metrics, the figures that are set and the signal's side by side (where a
        trainer's metric has the name of a figure, the figure is kept)."""
        out: dict[str, float] = {"step": float(self.step), **self.metrics}
        figures = self.model_dump(exclude={"schema_version", "step", "signal", "metrics"}, exclude_none=True)
        out.update({name: float(value) for name, value in figures.items()})
        if self.signal is not None:
            out.update(self.signal.flat())
        return out


def progress_line(record: ProgressRecord) -> str:
    """The stdout line a worker prints for ``record`` (figures that are not set left out)."""
    return PROGRESS_PREFIX + record.model_dump_json(exclude_none=True)


def read_progress(line: str, where: str) -> ProgressRecord:
    """The record of a worker's progress ``line`` (:data:`PROGRESS_PREFIX` and its JSON); ``where`` names the
    trainer's log in the one-line :class:`EngineError` for a line that is not a record of this version."""
    text = line.removeprefix(PROGRESS_PREFIX).strip()
    try:
        raw = json.loads(text)
    except ValueError:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise EngineError(f"{where}: progress record is not JSON: {shown!r}") from None
    return PROGRESS_VERSIONS.parse(raw, ProgressRecord, where)
