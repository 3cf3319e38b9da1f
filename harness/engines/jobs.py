"""The files an engine and its worker process hand each other, as versioned models both sides import.

A job file is what the engine writes for its child process (``python -m <worker> <job.json>``):
:class:`TrainJob` for a whole training run (``trl-grpo``'s :class:`TrlJob`, ``verl``'s :class:`VerlJob`) and
:class:`UpdateJob` for one ``trace-grpo`` policy update. :class:`TrainInfo` is what a worker writes beside the
checkpoint it trained (``harness-train.json``), read back by the engine and by the run's manifest. Each carries
``schema_version`` and is read through :class:`harness.records.Versions`: a reader refuses a newer file, and a
train-info file written before it had a version reads as version 1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict

from harness.errors import EngineError
from harness.records import Versions, write_record

if TYPE_CHECKING:
    from harness.engines.request import TrainRequest

TRAIN_INFO_FILE = "harness-train.json"

JOB_VERSIONS = Versions("job file", 1, error=EngineError)
INFO_VERSIONS = Versions("train info", 1, error=EngineError, unversioned=1)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Job(_File):
    """A job file: written by the engine, read by its worker."""

    schema_version: Literal[1] = 1

    def write(self, path: Path) -> Path:
        return write_record(path, self)

    @classmethod
    def read(cls, path: Path) -> Self:
        return JOB_VERSIONS.read(path, cls)


class TrainJob(Job):
    """The fields every training worker reads: which benchmark, spec, model, output folder, seed and data mirror."""

    benchmark: str
    profile: str
    spec_path: Path
    base_model: Path
    output_dir: Path
    seed: int
    data_mirror: Path | None = None
    """``HARNESS_DATA_MIRROR`` of the engine's process: where the worker reads the datasets from."""

    @classmethod
    def for_request(cls, request: TrainRequest, **extra: Any) -> Self:
        """The job of ``request``, with ``extra`` (the fields of a subclass)."""
        mirror = os.environ.get("HARNESS_DATA_MIRROR", "")
        return cls(
            benchmark=request.spec.name,
            profile=request.spec.profile,
            spec_path=request.spec_path,
            base_model=request.base_model,
            output_dir=request.output_dir,
            seed=request.seed,
            data_mirror=Path(mirror) if mirror else None,
            **extra,
        )


class TrlJob(TrainJob):
    """``trl-grpo``'s job: and the trainer checkpoint to resume from, if any."""

    resume_from_checkpoint: Path | None = None


class SimulatorRef(_File):
    """The user simulator the verl rollout workers talk to; its key goes through their environment, never a file."""

    base_url: str
    model: str


class VerlJob(TrainJob):
    """``verl``'s job: and the Ray cluster to join (None: start a local head) and the run's user simulator."""

    ray_address: str | None = None
    simulator: SimulatorRef | None = None


class UpdateJob(Job):
    """One ``trace-grpo`` policy update: ``checkpoint`` and the triplets file in, the updated weights to
    ``output_dir``."""

    checkpoint: Path
    triplets: Path
    output_dir: Path
    learning_rate: float
    max_grad_norm: float
    seed: int
    torch_threads: int | None = None


class TrainInfo(_File):
    """``harness-train.json`` beside a trained checkpoint: the engine, its steps and seed, and what it adds."""

    schema_version: Literal[1] = 1
    engine: str
    steps: int
    seed: int
    precision: str | None = None
    """``trl-grpo``: the arithmetic of the training passes (recorded in the manifest)."""
    verl_checkpoint: str | None = None
    """``verl``: the saved FSDP step that was merged into the checkpoint."""
    rollouts_traced: int | None = None
    llm_calls_traced: int | None = None

    def write(self, checkpoint: Path) -> Path:
        return write_record(checkpoint / TRAIN_INFO_FILE, self, indent=None)

    @classmethod
    def read(cls, checkpoint: Path) -> TrainInfo:
        """The train info beside ``checkpoint``; :class:`EngineError` when it is missing or not one."""
        return INFO_VERSIONS.read(checkpoint / TRAIN_INFO_FILE, cls)
