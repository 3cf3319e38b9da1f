"""Per-step scalars for TensorBoard (``train/<metric>``) from the harness's own step records, beside whatever the
trainer itself logs there."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping
from pathlib import Path


class StepCurves:
    """Per-step scalars for TensorBoard (``<prefix><metric>``, ``train/`` by default), written with tensorboard's own
    event writer: the one torch's ``SummaryWriter`` wraps, without importing torch into the harness process (230 MB,
    3 s)."""

    def __init__(self, folder: Path, prefix: str = "train/") -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._writer = EventFileWriter(str(folder))
        self._prefix = prefix

    @staticmethod
    def available() -> bool:
        """Whether the tensorboard package is installed (it is in the harness environment's lock)."""
        return importlib.util.find_spec("tensorboard") is not None

    def add(self, step: int, record: Mapping[str, float]) -> None:
        """One event holding every metric of ``record`` but the step number itself, flushed at once."""
        from tensorboard.compat.proto import event_pb2, summary_pb2

        values = [
            summary_pb2.Summary.Value(tag=f"{self._prefix}{name}", simple_value=float(value))
            for name, value in record.items()
            if name != "step"
        ]
        event = event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values))
        self._writer.add_event(event)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
