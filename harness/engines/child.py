"""A trainer in a child process: its job file, its launch on the run's backend, its progress, how it ended.

Every engine that trains outside the harness process (``trl-grpo``, ``verl``, and ``trace-grpo``'s per-step
updates) goes through :func:`run_trainer`: the worker module is started as ``python -m <module> <job.json>`` in the
``harness`` environment (a local process or a container), each line it prints with :data:`PROGRESS_PREFIX` is a JSON
progress record handed to the engine as it arrives, and an exit other than 0 raises :class:`EngineError` naming
the cause (:class:`harness.exits.ExitWatch`: a kernel out-of-memory kill is said so) and the log file.

:func:`start_trainer` with ``held=True`` starts a worker early: it imports, loads and builds what it needs, then
waits (:func:`wait_for_start`) until :meth:`Trainer.follow` lets it train -- its start-up runs during an earlier
phase instead of on the run's critical path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.backends.base import Handle, LaunchSpec
from harness.cores import share_cores
from harness.engines.base import TrainRequest
from harness.errors import EngineError
from harness.exits import ExitWatch

PROGRESS_PREFIX = "HARNESS_PROGRESS "
"""A worker's stdout line that starts with this is one JSON progress record."""

WORKER_ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}

START_FILE = "start"
"""In a held worker's output folder: written when it may train (see :func:`wait_for_start`)."""


def progress_line(record: Mapping[str, Any]) -> str:
    """The stdout line a worker prints for one progress record."""
    return PROGRESS_PREFIX + json.dumps(record)


def request_job(request: TrainRequest, **extra: Any) -> dict[str, Any]:
    """The job fields every worker reads (which benchmark, spec, model, output folder, seed), plus ``extra``."""
    return {
        "benchmark": request.spec.name,
        "profile": request.spec.profile,
        "spec_path": str(request.spec_path),
        "base_model": str(request.base_model),
        "output_dir": str(request.output_dir),
        "seed": request.seed,
        "data_mirror": os.environ.get("HARNESS_DATA_MIRROR", ""),
        **extra,
    }


def write_job(path: Path, job: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(job, indent=2))
    return path


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
    trainer = start_trainer(request, what=what, module=module, job=job, mounts=mounts, env=env, unset=unset)
    return trainer.follow(total_steps)


class Trainer:
    """A started worker process (see :func:`start_trainer`)."""

    def __init__(
        self, request: TrainRequest, what: str, handle: Handle, watch: ExitWatch, start_file: Path | None
    ) -> None:
        self.request, self.what, self.handle, self.watch = request, what, handle, watch
        self.start_file = start_file

    def follow(self, total_steps: int | None = None) -> list[dict[str, Any]]:
        """Let a held worker train, then hand its progress records to ``request.on_progress`` until it exits;
        return them, or raise :class:`EngineError` naming how it ended."""
        request = self.request
        if self.start_file is not None:
            self.start_file.write_text(f"{time.time()}\n")
        records: list[dict[str, Any]] = []
        try:
            for line in self.handle.lines():
                if line.startswith(PROGRESS_PREFIX):
                    record = json.loads(line[len(PROGRESS_PREFIX) :])
                    records.append(record)
                    step = int(record.get("step", 0))
                    if total_steps is not None and request.on_progress is not None and step > 0:
                        request.on_progress(step, total_steps, record)
            code = self.handle.wait()
        finally:
            self.handle.stop()
        if code != 0:
            raise EngineError(f"{self.what} failed: the trainer {self.watch.describe(code)}; see {request.log_path}")
        return records

    def stop(self) -> None:
        self.handle.stop()


def start_trainer(
    request: TrainRequest,
    *,
    what: str,
    module: str,
    job: Path,
    mounts: tuple[Path, ...],
    env: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
    held: bool = False,
) -> Trainer:
    """Start ``python -m module job`` on the request's backend (see :func:`run_trainer`) and return at once.

    ``held``: the worker waits before it trains until :meth:`Trainer.follow` writes :data:`START_FILE` into the
    job's folder (its ``start_when`` field; the worker calls :func:`wait_for_start`)."""
    start_file = job.parent / START_FILE if held else None
    if start_file is not None:
        start_file.unlink(missing_ok=True)
        job.write_text(json.dumps({**json.loads(job.read_text()), "start_when": str(start_file)}, indent=2))
    environment = share_cores(dict(os.environ, **WORKER_ENV))  # beside a model server or another run (harness.cores)
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
    return Trainer(request, what, handle, watch, start_file)


def wait_for_start(job: Mapping[str, Any], parent: int | None = None, poll_s: float = 0.05) -> None:
    """In a worker: return when the job may train -- at once, unless it was started held (``start_when``: a file
    that appears when it may). Exits when the process that started it is gone (an orphan would hold its memory):
    ``parent`` is the worker's parent process as the worker saw it first thing (default: now)."""
    path = job.get("start_when")
    if not path:
        return
    parent = os.getppid() if parent is None else parent
    while not os.path.exists(path):
        if os.getppid() != parent:
            raise SystemExit("the run that started this trainer is gone")
        time.sleep(poll_s)


def require_checkpoint(checkpoint: Path, what: str, log_path: Path) -> Path:
    """``checkpoint`` when the trainer wrote it (its ``config.json``), else the engine's one-line failure."""
    if not (checkpoint / "config.json").exists():
        raise EngineError(f"{what} wrote no checkpoint at {checkpoint}; see {log_path}")
    return checkpoint
