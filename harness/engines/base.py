"""The training-engine interface: :class:`Engine`, its request and result, and the config every engine shares.

An engine takes a base checkpoint and the benchmark's training tasks and returns a new checkpoint that the
evaluation phase can serve. Engines register themselves by name with :func:`register_engine`, so a spec names
them (``training.engine``) and the results record which one ran. Each engine validates its own
``training.config`` with its :attr:`Engine.config_model`; the spec's schema does not know the engines.

An engine trains in a worker process (:mod:`harness.engines.child`) through :meth:`Engine.run_worker`: a job file
written, the worker run on it, the checkpoint it wrote required. :class:`WorkerEngine` is the whole skeleton of an
engine whose training run is one such worker (``trl-grpo``, ``verl``): it supplies only its job, its worker module and
what differs (environment, step count, a resume).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from harness.benchmark.protocol import Benchmark
from harness.engines.child import require_checkpoint, run_trainer
from harness.engines.jobs import Job, TrainInfo, TrainJob
from harness.engines.progress import ProgressRecord
from harness.engines.request import Collect, TrainRequest, TrainResult
from harness.engines.shaping import Shaping
from harness.errors import EngineError, SpecError
from harness.registry import Registry
from harness.spec import BenchmarkSpec

J = TypeVar("J", bound=TrainJob)

JOB_FILE = "train-request.json"
"""A :class:`WorkerEngine`'s job file, in the run's ``output_dir``."""


class EngineConfig(BaseModel):
    """The keys every engine's ``training.config`` has; an engine's own config model adds its keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    shaping: dict[str, float] = Field(
        default_factory=dict,
        description="Training-reward shaping, {term: weight}: the benchmark's shaping terms and length_penalty "
        "(harness.engines.shaping); pass rates never use it.",
    )


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
    worker: ClassVar[str] = ""
    """The module of the engine's worker process (``python -m <worker> <job.json>``), for :meth:`run_worker`."""

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

    def run_worker(
        self,
        request: TrainRequest,
        job: Job,
        job_path: Path,
        *,
        what: str,
        checkpoint: Path,
        mounts: tuple[Path, ...],
        env: dict[str, str] | None = None,
        unset: tuple[str, ...] = (),
        total_steps: int | None = None,
    ) -> list[ProgressRecord]:
        """Write ``job`` to ``job_path``, run :attr:`worker` on it until it exits and require the checkpoint it was to
        write at ``checkpoint``; the worker's progress records. ``what`` names the work in errors ("trl-grpo
        training", "trace-grpo update 3"); the other arguments are :func:`harness.engines.child.run_trainer`'s."""
        job.write(job_path)
        records = run_trainer(
            request,
            what=what,
            module=self.worker,
            job=job_path,
            mounts=mounts,
            env=env,
            unset=unset,
            total_steps=total_steps,
        )
        require_checkpoint(checkpoint, what, request.log_path)
        return records


class WorkerEngine(Engine, Generic[J]):
    """An engine whose whole training run is one worker process, fed a :class:`TrainJob` of type ``J``.

    :meth:`train` is the skeleton: the job (:meth:`job`), written to ``<output_dir>/train-request.json``; the worker
    run on it in the backend with the run's folders mounted, its progress relayed (:meth:`total_steps`); the
    checkpoint it wrote (:meth:`checkpoint`) required; its steps (:meth:`steps`, from ``harness-train.json``); and
    the :class:`TrainResult`. A subclass names its :attr:`worker` and supplies :meth:`job`, and overrides the other
    steps where it differs.
    """

    def train(self, request: TrainRequest) -> TrainResult:
        job = self.job(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        checkpoint = self.checkpoint(request)
        start = time.monotonic()
        records = self.run_worker(
            request,
            job,
            request.output_dir / JOB_FILE,
            what=f"{self.name} training",
            checkpoint=checkpoint,
            mounts=(request.output_dir, request.base_model, request.spec_path.parent),
            env=self.worker_env(request, job),
            unset=self.worker_unset(job),
            total_steps=self.total_steps(request),
        )
        self.after_worker(request)
        return TrainResult(
            checkpoint=checkpoint,
            steps=self.steps(checkpoint, records),
            metrics=records,
            wall_s=time.monotonic() - start,
            resumed_from_step=self.resumed_from_step(job),
        )

    @abstractmethod
    def job(self, request: TrainRequest) -> J:
        """The worker's job for ``request``; raise here when the run cannot start (nothing is written yet)."""

    def total_steps(self, request: TrainRequest) -> int | None:
        """The steps the progress counts to: each record of a step goes to ``request.on_progress``; None: none do."""
        return None

    def worker_env(self, request: TrainRequest, job: J) -> dict[str, str]:
        """Added to the worker's environment."""
        return {}

    def worker_unset(self, job: J) -> tuple[str, ...]:
        """Removed from the worker's environment."""
        return ()

    def checkpoint(self, request: TrainRequest) -> Path:
        """Where the worker writes the trained checkpoint."""
        return request.output_dir / "checkpoint"

    def after_worker(self, request: TrainRequest) -> None:
        """After the worker wrote the checkpoint: tidy what it left that no later step needs."""

    def steps(self, checkpoint: Path, records: list[ProgressRecord]) -> int:
        """The steps trained: as ``harness-train.json`` says, else one a progress record."""
        try:
            return TrainInfo.read(checkpoint).steps
        except EngineError:
            return len(records)

    def resumed_from_step(self, job: J) -> int:
        """The saved step the worker continued from; 0 when it started afresh."""
        return 0


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
    "WorkerEngine",
    "register_engine",
]
