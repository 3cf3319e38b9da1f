"""The training-engine interface: one implementation per engine, all behind :class:`Engine`.

An engine takes a base checkpoint and the benchmark's training tasks and returns a new checkpoint that the
evaluation phase can serve. Engines register themselves by name with :func:`register_engine`, so the spec names
them and the results record which one ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel

from harness.errors import SpecError
from harness.registry import Registry

if TYPE_CHECKING:
    from harness.spec.schema import BenchmarkSpec


@dataclass(frozen=True)
class TrainRequest:
    """Everything an engine needs for one training run."""

    spec: BenchmarkSpec
    spec_path: Path
    base_model: Path
    output_dir: Path
    seed: int
    log_path: Path
    on_progress: Callable[[int, int, dict[str, float]], None] | None = None
    resume_from: Path | None = None
    """An earlier attempt's ``output_dir``: continue from the last checkpoint the engine saved there, if any."""
    backend: Any = None
    """Where the trainer process runs (a :class:`harness.backends.Backend`); local when None."""
    labels: dict[str, str] = field(default_factory=dict)
    ray_address: str | None = None
    """A Ray cluster for engines that run on one (verl); None: the engine's default (``RAY_ADDRESS`` or local)."""
    benchmark: Any = None
    """The loaded benchmark (engines that run its rollouts or its reward hooks)."""
    tasks: list[Any] = field(default_factory=list)
    """The training split's tasks."""
    collect: Callable[..., list[Any]] | None = None
    """``collect(checkpoint, tasks, n, temperature, out_path, trace)``: serve ``checkpoint`` and run ``n`` real
    rollouts of each task with the benchmark's agent (and user simulator), tracing the policy's calls into
    ``trace``; returns the episodes. Provided by the runner to engines that train on their own rollouts."""
    simulator: tuple[str, str, str] | None = None
    """The run's user simulator as (base_url, model, api_key), for engines whose workers run the rollouts
    themselves (verl); None for benchmarks without one."""


@dataclass(frozen=True)
class TrainResult:
    checkpoint: Path
    steps: int
    metrics: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    resumed_from_step: int = 0
    """The saved step training continued from (``TrainRequest.resume_from``); 0 when it started afresh."""


class Engine(Protocol):
    """A training engine. ``config_model`` validates ``training.config`` of the spec."""

    name: ClassVar[str]
    config_model: ClassVar[type[BaseModel]]
    # Optional: ``uses_policy_server: ClassVar[bool]`` -- True for an engine that trains on rollouts served by the
    # run's policy server (``TrainRequest.collect``), which then stays up through training; default False (the
    # server is stopped so the trainer has the machine, unless ``serving.keep_during_training``).
    # Optional: ``starts_while_server_stops: ClassVar[bool]`` -- True for an engine whose trainer may start while that
    # server is still shutting down (a CPU trainer, whose memory peaks long after its start); default False (the
    # server is gone before the trainer starts: a GPU trainer measures free accelerator memory when it starts).
    # Optional: ``check(spec, bench) -> None`` (a static method) -- raises SpecError when the benchmark cannot train
    # with this engine as configured (missing hooks, unknown shaping terms); the runner calls it before anything
    # starts.

    def train(self, request: TrainRequest) -> TrainResult: ...


ENGINES: Registry[type[Any]] = Registry("engine", SpecError)
"""Engines by name; the package (:mod:`harness.engines`) loads the built-in ones on the first lookup."""
register_engine = ENGINES.register
