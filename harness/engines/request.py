"""What an engine is given and what it returns: :class:`TrainRequest` and :class:`TrainResult`.

They live apart from :mod:`harness.engines.base` so that the modules the base class builds on (``child``, the
trainer process; ``jobs``, the files it is handed) can name a request without importing the base class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends import Backend
from harness.benchmark.protocol import Benchmark, Episode, Task
from harness.engines.progress import ProgressRecord
from harness.rollout.tracing import TraceStore
from harness.serving.simulator import SimulatorEndpoint
from harness.spec import BenchmarkSpec

Collect = Callable[[Path, list[Task], int, float, Path, TraceStore], list[Episode]]
"""``collect(checkpoint, tasks, n, temperature, out_path, trace)``: serve ``checkpoint`` and run ``n`` real rollouts
of each task with the benchmark's agent (and user simulator), tracing the policy's calls into ``trace``."""


@dataclass(frozen=True)
class TrainRequest:
    """Everything an engine needs for one training run."""

    spec: BenchmarkSpec
    spec_path: Path
    base_model: Path
    output_dir: Path
    seed: int
    log_path: Path
    on_progress: Callable[[int, int, ProgressRecord], None] | None = None
    """``on_progress(step, total_steps, record)`` for each training step as it ends."""
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
    metrics: list[ProgressRecord] = field(default_factory=list)
    """The trainer's progress records, in the order it reported them."""
    wall_s: float = 0.0
    resumed_from_step: int = 0
    """The saved step training continued from (``TrainRequest.resume_from``); 0 when it started afresh."""
