"""Timestamped marks of a run's progress, for start-up profiling (``bench/startup.py``).

With ``HARNESS_TIMING=<file>`` set, :func:`mark` appends one JSON line per event (``event``, wall-clock ``t``,
``pid`` and any fields given); without it, marks cost one environment lookup. Events of a run, in order: ``cli``
(the command line parsed, imports done), ``model_ready``, ``server_launched``, ``setup_done``, ``tools_ready``,
``server_ready``, ``first_request`` (the first chat request leaves for the model server).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

TIMING_ENV = "HARNESS_TIMING"


def enabled() -> bool:
    return bool(os.environ.get(TIMING_ENV))


def mark(event: str, **fields: Any) -> None:
    """Append ``event`` with the current time to the trace file, when tracing is on."""
    path = os.environ.get(TIMING_ENV)
    if not path:
        return
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The marks written so far (a line cut by a crash is skipped)."""
    out: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
