"""A ``verl`` training task as VERL carries it to the agent loop (:mod:`harness.engines.verl.rows`): the row the
worker writes into its parquet files reads back as the same task, limits and shaping; a row of another version or
one that is not a task row is a one-line error naming the task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.benchmark.protocol import Task
from harness.engines.verl.rows import TaskRow
from harness.errors import EngineError


def row(**fields: Any) -> TaskRow:
    task = Task(id="t1", prompt="2 + 2?", answer="4", data={"id": "t1", "numbers": [2, 2], "nested": {"k": "é"}})
    return TaskRow.of(
        3, task, spec_path="/b/spec.yaml", profile="p", max_turns=5, seed=2, shaping={"format_reward": 0.1}, **fields
    )


def through_parquet(rows: list[TaskRow], tmp_path: Path) -> list[dict[str, Any]]:
    """The rows' ``extra_info`` written as the worker writes them and read back as a parquet reader hands them."""
    path = tmp_path / "train.parquet"
    pd.DataFrame([{"extra_info": r.extra_info()} for r in rows]).to_parquet(path)
    return [r["extra_info"] for r in pd.read_parquet(path).to_dict("records")]


def test_a_row_reads_back_through_parquet_as_it_was_written(tmp_path: Path) -> None:
    written = [
        row(),
        row(max_tokens=256, simulator_url="http://127.0.0.1:9/v1", simulator_model="user", validation=True),
    ]
    read = [TaskRow.read(raw) for raw in through_parquet(written, tmp_path)]
    assert read == written
    assert read[0].task() == Task(id="t1", prompt="2 + 2?", answer="4", data=row().task().data)
    assert read[0].task().data["nested"] == {"k": "é"} and read[0].max_tokens is None
    assert read[0].shaping_weights() == {"format_reward": 0.1}
    assert read[1].max_tokens == 256 and read[1].simulator_model == "user"
    assert (read[0].validation, read[1].validation) == (False, True)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"schema_version": None}, "task t1: verl task row: schema_version: missing required key"),
        ({"schema_version": 2}, "task t1: verl task row: written by a newer harness (schema_version 2; "),
        ({"max_turns": None}, "task t1: verl task row: max_turns: missing required key"),
        ({"max_turns": "many"}, "task t1: verl task row: max_turns: Input should be a valid integer"),
        ({"tools_kwargs": {}}, "task t1: verl task row: tools_kwargs: unknown key"),
        ({"task_data": "{cut"}, "task t1: verl task row: task_data: not JSON text"),
        ({"shaping": "[1]"}, "task t1: verl task row: shaping: not a JSON object"),
    ],
)
def test_a_row_that_is_not_a_task_row_of_this_version_is_one_line(change: dict[str, Any], problem: str) -> None:
    raw = row().extra_info()
    for key, value in change.items():
        if value is None:
            del raw[key]
        else:
            raw[key] = value
    with pytest.raises(EngineError) as err:
        TaskRow.read(raw)
    assert str(err.value).startswith(problem) and "\n" not in str(err.value)


def test_the_task_data_keeps_what_json_cannot_hold_as_text() -> None:
    task = Task(id="t2", prompt="p", answer="a", data={"when": Path("/x")})
    assert json.loads(TaskRow.of(0, task, spec_path="s", profile="p", max_turns=1).task_data) == {"when": "/x"}
