"""The files an engine and its worker process hand each other, as versioned models both sides import.

A job file is what the engine writes for its child process (``python -m <worker> <job.json>``):
:class:`TrainJob` for a whole training run (``trl-grpo``'s :class:`TrlJob`, ``verl``'s :class:`VerlJob`) and
:class:`UpdateJob` for one ``trace-grpo`` policy update, with the triplets file it names (a :class:`Triplet` per
line: :func:`write_triplets`, :func:`read_triplets`). :class:`TrainInfo` is what a worker writes beside the
checkpoint it trained (``harness-train.json``), read back by the engine and by the run's manifest. Each carries
``schema_version`` and is read through :class:`harness.records.Versions`: a reader refuses a newer file, and a
train-info file written before it had a version reads as version 1. A job file and its triplets are read only by
the worker the engine starts on them, so a triplet of no version is refused too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
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
TRIPLET_VERSIONS = Versions("triplet", 1, error=EngineError)


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


class Triplet(_File):
    """One line of an :class:`UpdateJob`'s triplets file: a traced call of the policy, its prompt's and its
    completion's token ids, and the GRPO advantage of the rollout it was made in."""

    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")

    schema_version: Literal[1] = 1
    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    rollout: tuple[str, int]
    """The rollout: its task's id and sample."""


def write_triplets(path: Path, triplets: Sequence[Triplet]) -> Path:
    """``triplets`` as the JSONL file at ``path``, one a line."""
    path.write_text("".join(triplet.model_dump_json() + "\n" for triplet in triplets), encoding="utf-8")
    return path


def read_triplets(path: Path) -> list[Triplet]:
    """The triplets in the JSONL file at ``path`` (blank lines skipped); :class:`EngineError` naming the file, and
    the line where one is not a triplet of this version."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EngineError(f"{path}: cannot read triplets: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise EngineError(f"{path}: triplets are not UTF-8 text") from None
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError:
            raise EngineError(f"{path}:{number}: triplet is not JSON") from None
        out.append(TRIPLET_VERSIONS.parse(raw, Triplet, f"{path}:{number}"))
    return out


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
