"""A trainer in a child process: its launch on the run's backend, its progress, how it ended.

Every engine that trains outside the harness process (``trl-grpo``, ``verl``, and ``trace-grpo``'s per-step updates)
goes through :func:`run_trainer` (by :meth:`harness.engines.base.Engine.run_worker`): the worker module is started
as ``python -m <module> <job.json>`` (the job a model of :mod:`harness.engines.jobs`, written by the engine, read by
the worker) in the ``harness`` environment (a local process or a container), each line it prints with
:data:`~harness.engines.progress.PROGRESS_PREFIX` is a :class:`~harness.engines.progress.ProgressRecord` handed to
the engine as it arrives (a line that is not one stops the trainer with a one-line error naming the log), and an
exit other than 0 raises :class:`EngineError` naming the cause (:class:`harness.exits.ExitWatch`: a kernel
out-of-memory kill is said so) and the log file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from harness.backends.base import LaunchSpec
from harness.engines.progress import PROGRESS_PREFIX, ProgressRecord, read_progress
from harness.engines.request import TrainRequest
from harness.errors import EngineError
from harness.exits import ExitWatch
from harness.serving.cores import share_cores

WORKER_ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def run_trainer(
    request: TrainRequest,
    *,
    what: str,
    module: str,
    job: Path,
    mounts: tuple[Path, ...],
    env: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
    total_steps: int | None = None,
) -> list[ProgressRecord]:
    """Run ``python -m module job`` on the request's backend until it exits; return its progress records.

    ``what`` names the work in errors ("trl-grpo training", "trace-grpo update 3"); ``env`` is added to this
    process's environment and :data:`WORKER_ENV`, ``unset`` removed from it; ``mounts`` are the paths a container
    needs. With ``total_steps``, each record of a step (``step`` > 0) goes to ``request.on_progress`` as it arrives.
    A progress line that is not a record stops the trainer: :class:`EngineError` naming ``what`` and the log.
    """
    environment = share_cores(dict(os.environ, **WORKER_ENV))  # beside a model server or another run
    environment.update(env or {})
    for name in unset:
        environment.pop(name, None)
    backend = request.backend
    if backend is None:
        from harness.backends import get_backend

        backend = get_backend("local")
    watch = ExitWatch()
    handle = backend.launch(
        LaunchSpec(
            role="train",
            env_name="harness",
            argv=["-m", module, str(job)],
            env=environment,
            log_path=request.log_path,
            mounts=mounts,
            capture_stdout=True,
            labels=request.labels,
        )
    )
    records: list[ProgressRecord] = []
    try:
        for line in handle.lines():
            if line.startswith(PROGRESS_PREFIX):
                record = read_progress(line, f"{what} ({request.log_path})")
                records.append(record)
                if total_steps is not None and request.on_progress is not None and record.step > 0:
                    request.on_progress(record.step, total_steps, record)
        code = handle.wait()
    finally:
        handle.stop()
    if code != 0:
        raise EngineError(f"{what} failed: the trainer {watch.describe(code)}; see {request.log_path}")
    return records


def require_checkpoint(checkpoint: Path, what: str, log_path: Path) -> Path:
    """``checkpoint`` when the trainer wrote it (its ``config.json``), else the engine's one-line failure."""
    if not (checkpoint / "config.json").exists():
        raise EngineError(f"{what} wrote no checkpoint at {checkpoint}; see {log_path}")
    return checkpoint
