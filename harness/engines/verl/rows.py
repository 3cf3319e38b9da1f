"""One task of a ``verl`` training run as VERL carries it: the ``extra_info`` of a row of the parquet files the
worker writes (:func:`harness.engines.verl.worker.write_data`) and VERL hands, row by row, to the agent loop in its
Ray workers (:mod:`harness.engines.verl.agent_loop`).

A row's ``extra_info`` is a :class:`TaskRow`: the task, where its benchmark comes from (spec and profile), the
rollout's limits and seed, the profile's reward shaping and the run's user simulator. Parquet keeps it as a struct
of plain columns, so the task's dataset row and the shaping weights travel as JSON text; the model reads them back
(:meth:`TaskRow.task`, :meth:`TaskRow.shaping_weights`). A row carries ``schema_version`` and is read through
:class:`harness.records.Versions`: a row of another version, or one that is not a task row, stops the sample with a
one-line :class:`EngineError` naming the task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.benchmark.protocol import Task
from harness.errors import EngineError
from harness.records import Versions

ROW_VERSIONS = Versions("verl task row", 1, error=EngineError)


class TaskRow(BaseModel):
    """The ``extra_info`` of one VERL row."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    index: int
    """The row's place in its split (VERL's datasets read it)."""
    task_id: str
    prompt: str
    answer: str
    task_data: str = "{}"
    """The task's whole dataset row, as JSON text."""
    spec_path: str
    profile: str
    max_turns: int
    max_tokens: int | None = None
    """Each reply's cap, as in evaluation; None: the served context's."""
    seed: int = 0
    validation: bool = False
    """A row of the validation split (VERL validates on it; its rollouts are not training groups)."""
    shaping: str = "{}"
    """The profile's shaping weights by term, as JSON text."""
    simulator_url: str = ""
    """The run's user simulator (served beside the policy, never trained); empty where the benchmark has none."""
    simulator_model: str = ""

    @classmethod
    def of(cls, index: int, task: Task, **fields: Any) -> TaskRow:
        """The row of ``task`` (its dataset row and the shaping weights written as JSON text)."""
        shaping = fields.pop("shaping", None) or {}
        return cls(
            index=index,
            task_id=task.id,
            prompt=task.prompt,
            answer=task.answer,
            task_data=json.dumps(task.data, default=str),
            shaping=json.dumps(shaping),
            **fields,
        )

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> TaskRow:
        """The row VERL handed over (its ``extra_info``), checked: a one-line :class:`EngineError` naming the task
        when it is not a task row of this version."""
        where = f"task {raw.get('task_id', '?')}"
        row = ROW_VERSIONS.parse(dict(raw), cls, where)
        for name, text in (("task_data", row.task_data), ("shaping", row.shaping)):
            try:
                value = json.loads(text)
            except ValueError:
                raise EngineError(f"{where}: verl task row: {name}: not JSON text") from None
            if not isinstance(value, dict):
                raise EngineError(f"{where}: verl task row: {name}: not a JSON object")
        return row

    def extra_info(self) -> dict[str, Any]:
        """The row as the parquet file keeps it."""
        return self.model_dump()

    def task(self) -> Task:
        return Task(id=self.task_id, prompt=self.prompt, answer=self.answer, data=json.loads(self.task_data))

    def shaping_weights(self) -> dict[str, float]:
        return {str(k): float(v) for k, v in json.loads(self.shaping).items()}
