"""A trainer's progress records (:mod:`harness.engines.progress`): what a worker prints is what the engine reads
back, figure for figure; the run keeps them flat, as before they were typed; a line without a version, of another
version or not a record is a one-line error naming where it came from."""

from __future__ import annotations

import math

import pytest

from harness.engines.progress import PROGRESS_PREFIX, ProgressRecord, progress_line, read_progress
from harness.engines.signal import group_signal
from harness.errors import EngineError

SIGNAL = group_signal({"a": [1.0, 0.0], "b": [0.0, 0.0]}, {"a": [1.0, 0.0], "b": [0.0, 0.0]}).record()


def test_a_record_reads_back_as_it_was_printed() -> None:
    record = ProgressRecord(
        step=3,
        step_time_s=1.25,
        loss=0.5,
        grad_norm=2.0,
        reward_mean=0.25,
        tokens=120,
        signal=SIGNAL,
        metrics={"learning_rate": 1e-6, "completions_mean_length": 12.5, "kl": math.nan, "entropy": math.inf},
    )
    line = progress_line(record)
    assert line.startswith(PROGRESS_PREFIX) and "\n" not in line
    assert '"schema_version":1' in line and "task_reward_mean" not in line  # figures not set are left out
    back = read_progress(line, "train.log")
    assert back.model_dump(exclude={"metrics"}) == record.model_dump(exclude={"metrics"})
    assert back.metrics["learning_rate"] == 1e-6 and back.metrics["entropy"] == math.inf
    assert math.isnan(back.metrics["kl"])  # a trainer's NaN stays a NaN, not a refused null
    assert read_progress(progress_line(ProgressRecord()), "train.log") == ProgressRecord()


def test_the_run_keeps_a_record_flat() -> None:
    """One number by name, as the manifest's ``train_metrics`` held them before records were typed."""
    record = ProgressRecord(
        step=2, loss=0.5, reward_mean=0.25, signal=SIGNAL, metrics={"reward": 0.25, "loss": 9.0, "groups": 7.0}
    )
    assert record.flat() == {
        "step": 2.0,
        "reward": 0.25,
        "loss": 0.5,  # the figure, not a metric of the same name
        "reward_mean": 0.25,
        "groups": 2.0,
        "signal_groups": 1.0,
        "signal_share": 0.5,
        "task_signal_share": 0.5,
        "advantage_abs_mean": pytest.approx(0.5, abs=1e-4),
        "rollout_reward_std": pytest.approx(0.4330, abs=1e-4),
    }
    assert ProgressRecord(step=1, rollouts=4).flat() == {"step": 1.0, "rollouts": 4.0}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"step": 1, "loss": 0.5}', "progress record: schema_version: missing required key"),
        ('{"schema_version": 0, "step": 1}', "progress record: unknown schema_version 0 (the oldest format is 1)"),
        ('{"schema_version": 2}', "progress record: written by a newer harness (schema_version 2; this harness "),
        ('{"schema_version": 1, "step": 1, "lost": 0.5}', "progress record: lost: unknown key"),
        ('{"schema_version": 1, "step": 1.5}', "progress record: step: Input should be a valid integer"),
        ('{"schema_version": 1, "metrics": {"kl": "high"}}', "progress record: metrics.kl: Input should be a valid"),
        ('{"schema_version": 1, "signal": {"groups": 2}}', "progress record: signal.signal_groups: missing required"),
        ("[1, 2]", "progress record must be a JSON object"),
        ('{"schema_version": 1, "st', "progress record is not JSON: "),
    ],
)
def test_a_line_that_is_not_a_record_is_one_line_naming_where(text: str, problem: str) -> None:
    with pytest.raises(EngineError) as raised:
        read_progress(PROGRESS_PREFIX + text + "\n", "trl-grpo training (run/train.log)")
    message = str(raised.value)
    assert message.startswith(f"trl-grpo training (run/train.log): {problem}") and "\n" not in message
