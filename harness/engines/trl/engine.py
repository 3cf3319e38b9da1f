"""The CPU training engine: GRPO with TRL's ``GRPOTrainer``.

Real group-relative policy optimisation on CPU: for each prompt the policy samples ``num_generations``
completions (running the benchmark's tools, e.g. the real MCP calculator, in TRL's tool loop), the benchmark's
reward scores them, advantages are normalised within each group, and the clipped policy-gradient step updates the
weights. The trainer runs in a child process (``harness.engines.trl.worker``) so its memory is returned when it
ends and an interrupt can stop it; it prints one JSON progress line per step, which this side relays.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from harness.benchmark.protocol import Benchmark, TrainsSingleTurn
from harness.engines.base import EngineConfig, TrainRequest, WorkerEngine, register_engine
from harness.engines.jobs import TrlJob
from harness.errors import SpecError
from harness.spec import BenchmarkSpec


class TrlGrpoConfig(EngineConfig):
    """``training.config`` of ``trl-grpo``; ``shaping`` weighs the benchmark's shaping terms and length_penalty (a
    soft overlong penalty, as in DAPO: the share of max_completion_length a completion used, subtracted)."""

    max_steps: int = Field(2, gt=0, description="Optimizer steps.")
    train_limit: int | None = Field(None, gt=0, description="Use only the first N training tasks.")
    prompts_per_step: int = Field(2, gt=0, description="Distinct tasks per step; each gets num_generations samples.")
    num_generations: int = Field(4, ge=2, description="Group size G of GRPO.")
    learning_rate: float = Field(1e-6, gt=0, description="AdamW learning rate.")
    max_completion_length: int = Field(128, gt=0, description="Most tokens per completion (tool rounds included).")
    max_tool_calling_iterations: int = Field(2, ge=0, description="Tool rounds TRL runs per completion.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the training completions.")
    beta: float = Field(0.0, ge=0, description="KL coefficient; 0 disables the reference model.")
    epsilon: float = Field(0.2, gt=0, description="Lower clip range.")
    epsilon_high: float = Field(0.3, gt=0, description="Upper clip range.")
    micro_batch: int | None = Field(
        None,
        gt=0,
        description="Sequences per forward/backward pass; the step's prompts_per_step x num_generations sequences are "
        "accumulated in micro-batches of this size (same update, less activation memory). Default: all at once.",
    )
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in the backward pass: less memory, about a third more compute."
    )
    precision: Literal["float32", "bfloat16", "native"] = Field(
        "float32",
        description="Arithmetic of the forward and backward passes. bfloat16: mixed precision (bf16 autocast; "
        "weights, gradients and optimizer state stay float32); native: bfloat16 where the CPU computes it natively "
        "(AVX512-BF16 or AMX on x86, BF16 on Arm), else float32. Recorded with the checkpoint and in the manifest.",
    )
    torch_threads: int | None = Field(None, gt=0, description="torch's CPU threads (default: torch's choice).")
    save_steps: int = Field(
        1,
        ge=0,
        description="Save a resumable checkpoint (weights, optimizer, scheduler, RNG) every N steps before the last, "
        "keeping only the newest; `harness run --resume` continues from it. 0: none.",
    )

    @model_validator(mode="after")
    def _micro_batch_divides(self) -> TrlGrpoConfig:
        batch = self.prompts_per_step * self.num_generations
        if self.micro_batch is not None and batch % self.micro_batch:
            raise ValueError(f"micro_batch {self.micro_batch} must divide prompts_per_step x num_generations = {batch}")
        return self


@register_engine
class TrlGrpoEngine(WorkerEngine[TrlJob]):
    """GRPO with TRL's GRPOTrainer on a CPU: single-turn (a benchmark's training_prompt and score)."""

    name: ClassVar[str] = "trl-grpo"
    config_model: ClassVar[type[EngineConfig]] = TrlGrpoConfig
    starts_while_server_stops: ClassVar[bool] = True  # a CPU trainer: its memory peaks tens of seconds in
    worker: ClassVar[str] = "harness.engines.trl.worker"

    @classmethod
    def group_size(cls, spec: BenchmarkSpec) -> int | None:
        return TrlGrpoConfig.model_validate(spec.training.config).num_generations

    @classmethod
    def check(cls, spec: BenchmarkSpec, bench: Benchmark) -> None:
        """Before anything starts: the benchmark has the single-turn hooks, and the shaping terms exist."""
        if not isinstance(bench, TrainsSingleTurn):
            raise SpecError(
                f"benchmark {bench.name!r} has no single-turn training hooks (training_prompt, score) "
                "that engine 'trl-grpo' needs: train it with engine 'trace-grpo' or 'verl'"
            )
        super().check(spec, bench)

    def job(self, request: TrainRequest) -> TrlJob:
        resume = last_checkpoint(request.resume_from / "trainer") if request.resume_from else None
        return TrlJob.for_request(request, resume_from_checkpoint=resume)

    def total_steps(self, request: TrainRequest) -> int | None:
        return TrlGrpoConfig.model_validate(request.spec.training.config).max_steps

    def worker_env(self, request: TrainRequest, job: TrlJob) -> dict[str, str]:
        return {"TRL_EXPERIMENTAL_SILENCE": os.environ.get("TRL_EXPERIMENTAL_SILENCE", "1")}

    def after_worker(self, request: TrainRequest) -> None:
        for saved in (request.output_dir / "trainer").glob("checkpoint-*"):  # only a resume needs them: the
            shutil.rmtree(saved, ignore_errors=True)  # optimizer state is twice the model's size

    def resumed_from_step(self, job: TrlJob) -> int:
        return checkpoint_step(job.resume_from_checkpoint) if job.resume_from_checkpoint else 0


CHECKPOINT_FILES = ("trainer_state.json", "optimizer.pt", "scheduler.pt", "config.json")


def checkpoint_step(path: Path) -> int:
    return int(path.name.rpartition("-")[2])


def last_checkpoint(trainer_dir: Path) -> Path | None:
    """The newest complete ``checkpoint-<step>`` the trainer saved (one cut short by a crash is passed over)."""
    if not trainer_dir.is_dir():
        return None
    complete = [
        p
        for p in trainer_dir.glob("checkpoint-*")
        if p.name.rpartition("-")[2].isdigit() and all((p / f).exists() for f in CHECKPOINT_FILES) and _readable(p)
    ]
    return max(complete, key=checkpoint_step, default=None)


def _readable(checkpoint: Path) -> bool:
    """The trainer writes trainer_state.json last: when it parses, the files before it are complete."""
    try:
        return isinstance(json.loads((checkpoint / "trainer_state.json").read_text()), dict)
    except (OSError, ValueError):
        return False
