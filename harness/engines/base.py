"""The training-engine interface: :class:`Engine`, its request and result, and the config every engine shares.

An engine takes a base checkpoint and the benchmark's training tasks and returns a new checkpoint that the
evaluation phase can serve. Engines register themselves by name with :func:`register_engine`, so a spec names
them (``training.engine``) and the results record which one ran. Each engine validates its own
``training.config`` with its :attr:`Engine.config_model`; the spec's schema does not know the engines.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from harness.backends import Backend
from harness.benchmark.protocol import Benchmark, Episode, Task
from harness.engines.shaping import Shaping
from harness.errors import SpecError
from harness.registry import Registry
from harness.rollout.tracing import TraceStore
from harness.serving.simulator import SimulatorEndpoint
from harness.spec import BenchmarkSpec

Collect = Callable[[Path, list[Task], int, float, Path, TraceStore], list[Episode]]
"""``collect(checkpoint, tasks, n, temperature, out_path, trace)``: serve ``checkpoint`` and run ``n`` real rollouts
of each task with the benchmark's agent (and user simulator), tracing the policy's calls into ``trace``."""


class EngineConfig(BaseModel):
    """The keys every engine's ``training.config`` has; an engine's own config model adds its keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    shaping: dict[str, float] = Field(
        default_factory=dict,
        description="Training-reward shaping, {term: weight}: the benchmark's shaping terms and length_penalty "
        "(harness.engines.shaping); pass rates never use it.",
    )


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
    backend: Backend | None = None
    """Where the trainer process runs; local when None."""
    labels: dict[str, str] = field(default_factory=dict)
    ray_address: str | None = None
    """A Ray cluster for engines that run on one (verl); None: the engine's default (``RAY_ADDRESS`` or local)."""
    benchmark: Benchmark | None = None
    """The loaded benchmark (engines that run its rollouts or its reward hooks)."""
    tasks: list[Task] = field(default_factory=list)
    """The training split's tasks."""
    collect: Collect | None = None
    """Provided by the runner to engines that train on their own rollouts (:attr:`Engine.uses_policy_server`)."""
    simulator: SimulatorEndpoint | None = None
    """The run's user simulator, for engines whose workers run the rollouts themselves (verl); None for benchmarks
    without one."""


@dataclass(frozen=True)
class TrainResult:
    checkpoint: Path
    steps: int
    metrics: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    resumed_from_step: int = 0
    """The saved step training continued from (``TrainRequest.resume_from``); 0 when it started afresh."""


class Engine(ABC):
    """A training engine: a name, a config model, :meth:`train`, and optional capabilities with their defaults."""

    name: ClassVar[str]
    config_model: ClassVar[type[EngineConfig]] = EngineConfig
    uses_policy_server: ClassVar[bool] = False
    """True for an engine that trains on rollouts served by the run's policy server (``TrainRequest.collect``),
    which then stays up through training. False: the server is stopped so the trainer has the machine, unless
    ``serving.keep_during_training``."""
    starts_while_server_stops: ClassVar[bool] = False
    """True for an engine whose trainer may start while that server is still shutting down (a CPU trainer, whose
    memory peaks long after its start). False: the server is gone first (a GPU trainer measures free accelerator
    memory when it starts)."""

    @classmethod
    def config(cls, spec: BenchmarkSpec) -> EngineConfig:
        return cls.config_model.model_validate(spec.training.config)

    @classmethod
    def group_size(cls, spec: BenchmarkSpec) -> int | None:
        """Samples of one task compared with each other in a step (GRPO's group); None for an engine without
        groups."""
        return None

    @classmethod
    def check(cls, spec: BenchmarkSpec, bench: Benchmark) -> None:
        """Before anything starts: raise :class:`SpecError` when ``bench`` cannot train with this engine as
        configured. By default, every weighted shaping term must be one the benchmark provides."""
        Shaping.from_config(cls.config(spec).shaping).check(bench)

    @abstractmethod
    def train(self, request: TrainRequest) -> TrainResult: ...


ENGINES: Registry[type[Engine]] = Registry("engine", SpecError)
"""Engines by name; the package (:mod:`harness.engines`) loads the built-in ones on the first lookup."""


def register_engine(cls: type[Engine]) -> type[Engine]:
    """Class decorator: make an :class:`Engine` subclass known under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise SpecError(f"{getattr(cls, '__name__', cls)!r}: @register_engine needs a subclass of Engine")
    return ENGINES.register(cls)


__all__ = [
    "ENGINES",
    "Collect",
    "Engine",
    "EngineConfig",
    "SpecError",
    "TrainRequest",
    "TrainResult",
    "register_engine",
]
