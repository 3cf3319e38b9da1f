"""Timestamped marks of a run's progress, for start-up profiling (``bench/startup.py``).

With ``HARNESS_TIMING=<file>`` set, :func:`mark` appends one :class:`TimingMark` per event as a JSON line (its
``event``, wall-clock ``t`` and ``pid``); without it, marks cost one environment lookup. Events of a run, in order:
``cli`` (the command line parsed, imports done), ``model_ready``, ``server_launched``, ``setup_done``,
``tools_ready``, ``server_ready``, ``first_request`` (the first chat request leaves for the model server), and
``train_done`` where the run trains.

The file is read by another process (:func:`read`, the profiler that started the run): each line carries
``schema_version`` and is read through :class:`harness.records.Versions`, so a line of another version or a JSON
line that is not a mark is a one-line error naming the file and the line; a line a crash cut off is skipped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.records import Versions

TIMING_ENV = "HARNESS_TIMING"

Event = Literal[
    "cli",
    "model_ready",
    "server_launched",
    "setup_done",
    "tools_ready",
    "server_ready",
    "first_request",
    "train_done",
]

TIMING_VERSIONS = Versions("timing mark", 1)


class TimingMark(BaseModel):
    """One event of a run: when (seconds since the epoch) and in which process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    event: Event
    t: float
    pid: int


def enabled() -> bool:
    return bool(os.environ.get(TIMING_ENV))


def mark(event: Event) -> None:
    """Append ``event`` with the current time to the trace file, when tracing is on."""
    path = os.environ.get(TIMING_ENV)
    if not path:
        return
    line = TimingMark(event=event, t=time.time(), pid=os.getpid()).model_dump_json()
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def read(path: str | os.PathLike[str]) -> list[TimingMark]:
    """The marks written so far, in order (none when the file does not exist yet); a line cut by a crash is
    skipped, a JSON line that is not a mark of this version is a one-line error naming the file and the line."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    return TIMING_VERSIONS.parse_lines(data, TimingMark, str(path))
