"""The CPU training engine: GRPO with TRL's ``GRPOTrainer``.

Real group-relative policy optimisation on CPU: for each prompt the policy samples ``num_generations``
completions (running the benchmark's tools, e.g. the real MCP calculator, in TRL's tool loop), the benchmark's
reward scores them, advantages are normalised within each group, and the clipped policy-gradient step updates the
weights. The trainer runs in a child process (``harness.engines.trl_worker``) so its memory is returned when it
ends and an interrupt can stop it; it prints one JSON progress line per step, which this side relays.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from harness.backends.base import LaunchSpec
from harness.engines.base import TrainRequest, TrainResult, register_engine
from harness.errors import EngineError

PROGRESS_PREFIX = "HARNESS_PROGRESS "


class TrlGrpoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    max_steps: int = Field(2, gt=0, description="Optimizer steps.")
    train_limit: int | None = Field(None, gt=0, description="Use only the first N training tasks.")
    prompts_per_step: int = Field(2, gt=0, description="Distinct tasks per step; each gets num_generations samples.")
    num_generations: int = Field(4, ge=2, description="Group size G of GRPO.")
    learning_rate: float = Field(1e-6, gt=0)
    max_completion_length: int = Field(128, gt=0)
    max_tool_calling_iterations: int = Field(2, ge=0)
    temperature: float = Field(1.0, gt=0)
    beta: float = Field(0.0, ge=0, description="KL coefficient; 0 disables the reference model.")
    epsilon: float = Field(0.2, gt=0, description="Lower clip range.")
    epsilon_high: float = Field(0.3, gt=0, description="Upper clip range.")
    format_reward: float = Field(
        0.0, ge=0, description="Extra reward for a final answer in the required format (shapes small models)."
    )
    partial_credit: float = Field(
        0.0,
        ge=0,
        description="Weight of the benchmark's dense partial-credit reward (e.g. closeness of the last number to "
        "the answer), for models too small to earn the task reward.",
    )
    length_penalty: float = Field(
        0.0,
        ge=0,
        description="Subtract this times (completion length / max length): a soft overlong penalty (as in DAPO) "
        "that gives a small model a learning signal before it earns any task reward.",
    )
    torch_threads: int | None = Field(None, gt=0)


@register_engine
class TrlGrpoEngine:
    name: ClassVar[str] = "trl-grpo"
    config_model: ClassVar[type[BaseModel]] = TrlGrpoConfig

    def train(self, request: TrainRequest) -> TrainResult:
        config = TrlGrpoConfig.model_validate(request.spec.training.config)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        job = request.output_dir / "train-request.json"
        job.write_text(
            json.dumps(
                {
                    "benchmark": request.spec.name,
                    "profile": request.spec.profile,
                    "spec_path": str(request.spec_path),
                    "base_model": str(request.base_model),
                    "output_dir": str(request.output_dir),
                    "seed": request.seed,
                    "data_mirror": os.environ.get("HARNESS_DATA_MIRROR", ""),
                },
                indent=2,
            )
        )
        checkpoint = request.output_dir / "checkpoint"
        metrics: list[dict[str, float]] = []
        start = time.monotonic()
        env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
        env.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        backend = request.backend
        if backend is None:
            from harness.backends import get_backend

            backend = get_backend("local")
        handle = backend.launch(
            LaunchSpec(
                role="train",
                env_name="harness",
                argv=["-m", "harness.engines.trl_worker", str(job)],
                env=env,
                log_path=request.log_path,
                mounts=(request.output_dir, request.base_model, request.spec_path.parent),
                capture_stdout=True,
                labels=request.labels,
            )
        )
        try:
            for line in handle.lines():
                if line.startswith(PROGRESS_PREFIX):
                    record = json.loads(line[len(PROGRESS_PREFIX) :])
                    metrics.append(record)
                    if request.on_progress is not None:
                        request.on_progress(int(record["step"]), config.max_steps, record)
            code = handle.wait()
        finally:
            handle.stop()
        if code != 0:
            raise EngineError(f"trl-grpo training failed (exit code {code}); see {request.log_path}")
        if not (checkpoint / "config.json").exists():
            raise EngineError(f"trl-grpo training wrote no checkpoint at {checkpoint}; see {request.log_path}")
        return TrainResult(checkpoint=checkpoint, steps=len(metrics), metrics=metrics, wall_s=time.monotonic() - start)


def load_request(path: Path) -> dict[str, str]:
    data: dict[str, str] = json.loads(path.read_text())
    return data
