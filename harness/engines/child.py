"""A trainer in a child process: its launch on the run's backend, its progress, how it ended.

Every engine that trains outside the harness process (``trl-grpo``, ``verl``, and ``trace-grpo``'s per-step updates)
goes through :func:`run_trainer` (by :meth:`harness.engines.base.Engine.run_worker`): the worker module is started
as ``python -m <module> <job.json>`` (the job a model of :mod:`harness.engines.jobs`, written by the engine, read by
the worker) in the ``harness`` environment (a local process or a container), each line it prints with
:data:`PROGRESS_PREFIX` is a JSON progress record handed to the engine as it arrives, and an exit other than 0
raises :class:`EngineError` naming the cause (:class:`harness.exits.ExitWatch`: a kernel out-of-memory kill is said
so) and the log file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.backends.base import LaunchSpec
from harness.engines.request import TrainRequest
from harness.errors import EngineError
from harness.exits import ExitWatch
from harness.serving.cores import share_cores

PROGRESS_PREFIX = "HARNESS_PROGRESS "
"""A worker's stdout line that starts with this is one JSON progress record."""

WORKER_ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def progress_line(record: Mapping[str, Any]) -> str:
    """The stdout line a worker prints for one progress record."""
    return PROGRESS_PREFIX + json.dumps(record)


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
) -> list[dict[str, Any]]:
    """Run ``python -m module job`` on the request's backend until it exits; return its progress records.

    ``what`` names the work in errors ("trl-grpo training", "trace-grpo update 3"); ``env`` is added to this
    process's environment and :data:`WORKER_ENV`, ``unset`` removed from it; ``mounts`` are the paths a container
    needs. With ``total_steps``, each record of a step (``step`` > 0) goes to ``request.on_progress`` as it arrives.
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
    records: list[dict[str, Any]] = []
    try:
        for line in handle.lines():
            if line.startswith(PROGRESS_PREFIX):
                record = json.loads(line[len(PROGRESS_PREFIX) :])
                records.append(record)
                step = int(record.get("step", 0))
                if total_steps is not None and request.on_progress is not None and step > 0:
                    request.on_progress(step, total_steps, record)
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
