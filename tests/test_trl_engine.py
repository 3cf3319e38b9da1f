"""The CPU engine really trains: one GRPO step with the real calculator tool changes the weights."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file

from harness.assets.models import checkpoint_hash
from harness.engines import TrainRequest, get_engine
from harness.spec import load_spec
from support import copy_math_benchmark

pytestmark = pytest.mark.slow


def test_one_grpo_step_changes_the_weights(smoke_model: Path, tmp_path: Path) -> None:
    spec_path = copy_math_benchmark(tmp_path / "benchmarks", {"training": {"config": {"max_steps": 1}}})
    spec = load_spec(spec_path, "smoke")
    steps: list[int] = []
    result = get_engine("trl-grpo").train(
        TrainRequest(
            spec=spec,
            spec_path=spec_path,
            base_model=smoke_model,
            output_dir=tmp_path / "train",
            seed=0,
            log_path=tmp_path / "train.log",
            on_progress=lambda step, of, m: steps.append(step),
        )
    )
    assert result.steps == 1 and steps == [1]
    record = result.metrics[0]
    assert record.step == 1 and record.loss is not None and record.step_time_s is not None
    assert record.grad_norm is not None and record.grad_norm > 0, record
    assert "reward_std" in record.metrics and record.signal is not None and record.signal.groups == 2
    assert checkpoint_hash(result.checkpoint) != checkpoint_hash(smoke_model)
    before = load_file(str(smoke_model / "model.safetensors"))
    after = load_file(str(result.checkpoint / "model.safetensors"))
    changed = [k for k in before if k in after and not before[k].float().equal(after[k].float())]
    assert changed, "no tensor changed"
    assert (result.checkpoint / "tokenizer.json").exists()
    assert "tool_call" in (result.checkpoint / "chat_template.jinja").read_text()
    # the curves, through TRL's own TensorBoard logger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curves = EventAccumulator(str(tmp_path / "train" / "tensorboard"))
    curves.Reload()
    assert {"train/reward", "train/loss"} <= set(curves.Tags()["scalars"]), curves.Tags()["scalars"]
