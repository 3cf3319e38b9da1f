"""The rollout trace of a ``verl`` run (``rollout-traces.jsonl``): one :class:`TraceLine` per rollout, appended by the
agent loop in VERL's Ray workers and read by the engine's worker process.

The worker reads it twice: as training goes, for each step's GRPO signal (the groups whose rollouts are all there,
:class:`harness.engines.verl.worker.TraceGroups`), and once training is done, for the rollouts and LLM calls it
traced (``harness-train.json``). Both read through :func:`trace_lines`. Rollouts finish in several workers at once,
and a long line can be written in pieces, so two writers can cut each other's lines: a line that is not JSON (or
not UTF-8) is such a line, and is skipped, never counted. Each line carries ``schema_version``; the file is read only
by the run that wrote it, so a JSON line of no version, of another version or that is not a valid trace line is
refused: a one-line :class:`EngineError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.errors import EngineError
from harness.records import Versions

TRACE_VERSIONS = Versions("trace line", 1, error=EngineError)


class TraceLine(BaseModel):
    """One traced rollout: its task and group, its rewards, what the trajectory held and the conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    task_id: str
    uid: str
    """The rollout's group (VERL's prompt id): the ``n`` samples of one task in a step share it."""
    validation: bool = False
    """A validation rollout (a row of the validation split), not one of a training group."""
    reward: float
    """The training reward: the task's reward plus the profile's shaping."""
    task_reward: float
    """The task's own reward (0 when the rollout produced no episode)."""
    passed: bool
    error: str
    """Why the agent stopped early; empty when it did not."""
    llm_calls: int
    prompt_tokens: int
    response_tokens: int
    trained_tokens: int
    tool_calls: int
    messages: list[dict[str, Any]]
    """The conversation as traced (:attr:`harness.engines.verl.rollout.Trajectory.messages`)."""


def append_trace(path: Path, line: TraceLine) -> None:
    """``line`` appended to the trace at ``path`` in one write: ASCII JSON (a model's lone surrogate escaped)."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line.model_dump()) + "\n")


def trace_lines(data: bytes, path: Path) -> list[TraceLine]:
    """The trace lines in ``data``, whole lines of the trace at ``path``: a line two writers cut is skipped; a JSON
    line that is not a trace line of this version is a one-line :class:`EngineError` naming ``path``."""
    return TRACE_VERSIONS.parse_lines(data, TraceLine, str(path), numbered=False)


def read_traces(path: Path) -> list[TraceLine]:
    """Every trace line at ``path`` (:func:`trace_lines`); none when nothing was traced."""
    return trace_lines(path.read_bytes(), path) if path.exists() else []
