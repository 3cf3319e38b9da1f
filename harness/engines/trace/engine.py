"""The rollout-trace GRPO engine: the benchmark's own agent rollouts are the training data (CPU or GPU).

This is the agent-lightning recipe at its smallest: serve the current policy, run the benchmark's real rollouts
(the same agent code, tools and user simulator that evaluation runs), trace every call the *policy* makes with its
exact token ids (:mod:`harness.rollout.tracing`), give each call its rollout's group-normalised advantage (GRPO: rewards
of the ``group_size`` rollouts of one task, minus their mean, over their std), and take a policy-gradient step on
those (prompt, completion, advantage) triplets in a child process (:mod:`harness.engines.trace.worker`). One
on-policy step per batch, so the clipped ratio is 1 and the step is the plain GRPO gradient.

Multi-turn, multi-agent benchmarks (τ²'s user simulator) train only the assistant: the simulator and tools talk
to other endpoints and are never traced. A batch whose rollouts traced no call fails loudly; a batch whose
groups all have equal rewards carries no signal and leaves the weights unchanged (recorded as such). Each step's
progress record (:class:`~harness.engines.progress.ProgressRecord`: reward means, loss, step time, ...) goes to the
run, and, flat, to ``metrics.jsonl`` and as TensorBoard scalars to ``<output_dir>/tensorboard/`` (the run's
``train/tensorboard/``, which the manifest names).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from harness.engines.base import Engine, EngineConfig, TrainRequest, TrainResult, register_engine
from harness.engines.curves import StepCurves
from harness.engines.jobs import Triplet, UpdateJob, write_triplets
from harness.engines.progress import ProgressRecord
from harness.engines.shaping import Shaping, training_reward
from harness.engines.signal import GroupSignal, group_signal
from harness.errors import EngineError
from harness.results.store.schema import INFRA_ERROR_KINDS
from harness.rollout.tracing import TraceStore
from harness.spec import BenchmarkSpec


class TraceGrpoConfig(EngineConfig):
    """``training.config`` of ``trace-grpo``."""

    steps: int = Field(1, gt=0, description="Policy updates; each serves the current policy and collects a batch.")
    tasks_per_step: int = Field(2, gt=0, description="Distinct training tasks per batch.")
    group_size: int = Field(4, ge=2, description="Rollouts per task (GRPO group).")
    learning_rate: float = Field(1e-6, gt=0)
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of training rollouts.")
    max_triplets: int = Field(8, gt=0, description="Most (prompt, completion) pairs per update, largest |advantage|.")
    max_grad_norm: float = Field(1.0, gt=0)
    torch_threads: int | None = Field(None, gt=0, description="torch's CPU threads (default: torch's choice).")


def group_advantages(rewards: dict[tuple[str, int], float]) -> dict[tuple[str, int], float]:
    """GRPO advantages: per task, (reward - group mean) / (group std + 1e-4); 0 for a group with one member."""
    groups: dict[str, list[tuple[int, float]]] = {}
    for (task, sample), r in rewards.items():
        groups.setdefault(task, []).append((sample, r))
    out: dict[tuple[str, int], float] = {}
    for task, members in groups.items():
        values = [r for _, r in members]
        mean = statistics.fmean(values)
        std = statistics.pstdev(values) if len(values) > 1 else 0.0
        for sample, r in members:
            out[(task, sample)] = 0.0 if std == 0 else (r - mean) / (std + 1e-4)
    return out


def select_triplets(
    trace: TraceStore, advantages: dict[tuple[str, int], float], limit: int, seed: int
) -> list[Triplet]:
    """Every traced call of a rollout with a non-zero advantage, at most ``limit``, largest |advantage| first."""
    triplets = [
        Triplet(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, advantage=adv, rollout=key)
        for key, adv in advantages.items()
        if adv != 0.0
        for c in trace.calls.get(key, [])
    ]
    random.Random(seed).shuffle(triplets)  # noqa: S311 - a reproducible tie-break, not security
    triplets.sort(key=lambda t: -abs(t.advantage))
    return triplets[:limit]


def step_signal(training: Mapping[tuple[str, int], float], task: Mapping[tuple[str, int], float]) -> GroupSignal:
    """The step's group signal (:mod:`harness.engines.signal`) from rewards by (task, sample): a task's samples are
    its group."""

    def grouped(rewards: Mapping[tuple[str, int], float]) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for (task_id, _sample), value in sorted(rewards.items()):
            out.setdefault(task_id, []).append(value)
        return out

    return group_signal(grouped(training), grouped(task))


@register_engine
class TraceGrpoEngine(Engine):
    """GRPO on the benchmark's own rollouts (any agent, multi-turn, a user simulator), traced through the policy
    server."""

    name: ClassVar[str] = "trace-grpo"
    config_model: ClassVar[type[EngineConfig]] = TraceGrpoConfig
    uses_policy_server: ClassVar[bool] = True
    """Trains on rollouts served by the run's policy server (it stays up through training)."""
    worker: ClassVar[str] = "harness.engines.trace.worker"

    @classmethod
    def group_size(cls, spec: BenchmarkSpec) -> int | None:
        return TraceGrpoConfig.model_validate(spec.training.config).group_size

    def train(self, request: TrainRequest) -> TrainResult:
        config = TraceGrpoConfig.model_validate(request.spec.training.config)
        shaping = Shaping.from_config(config.shaping)
        by_id = {t.id: t for t in request.tasks}
        if request.collect is None or not request.tasks:
            raise EngineError("trace-grpo needs the run's rollout collector and training tasks")
        request.output_dir.mkdir(parents=True, exist_ok=True)
        tasks = list(request.tasks)
        random.Random(request.seed).shuffle(tasks)  # noqa: S311
        curves = StepCurves(request.output_dir / "tensorboard") if StepCurves.available() else None
        try:
            return self._train(request, config, shaping, by_id, tasks, curves)
        finally:
            if curves is not None:
                curves.close()

    def _train(
        self,
        request: TrainRequest,
        config: TraceGrpoConfig,
        shaping: Shaping,
        by_id: dict[str, Any],
        tasks: list[Any],
        curves: StepCurves | None,
    ) -> TrainResult:
        checkpoint, metrics, start = request.base_model, [], time.monotonic()
        for step in range(1, config.steps + 1):
            step_start = time.monotonic()
            first = ((step - 1) * config.tasks_per_step) % len(tasks)
            batch = [tasks[(first + i) % len(tasks)] for i in range(min(config.tasks_per_step, len(tasks)))]
            trace = TraceStore()
            episodes = request.collect(
                checkpoint,
                batch,
                config.group_size,
                config.temperature,
                request.output_dir / f"rollouts-step{step}.jsonl",
                trace,
            )
            scored = [e for e in episodes if e.error_kind not in INFRA_ERROR_KINDS]
            if not scored:
                raise EngineError(f"trace-grpo step {step}: every training rollout was an infrastructure error")
            if not any(trace.calls.get((e.task_id, e.sample)) for e in scored):
                raise EngineError(
                    f"trace-grpo step {step}: {len(scored)} rollouts traced no policy call with token ids "
                    "(nothing to train on; does the server return token ids?)"
                )
            rewards = {
                (e.task_id, e.sample): training_reward(request.benchmark, e, by_id[e.task_id], shaping) for e in scored
            }
            advantages = group_advantages(rewards)
            triplets = select_triplets(trace, advantages, config.max_triplets, request.seed + step)
            update: dict[str, Any] = {}
            if triplets:
                out = request.output_dir / f"step-{step}"
                update = self._update(request, config, checkpoint, triplets, out, step)
                checkpoint = out
            record = ProgressRecord(
                step=step,
                reward_mean=statistics.fmean(rewards.values()),
                task_reward_mean=statistics.fmean(e.reward for e in scored),
                rollouts=len(scored),
                infra_errors=len(episodes) - len(scored),
                traced_calls=sum(len(v) for v in trace.calls.values()),
                triplets=len(triplets),
                response_length_mean=statistics.fmean(
                    len(c.completion_ids) for calls in trace.calls.values() for c in calls
                ),
                signal=step_signal(rewards, {(e.task_id, e.sample): e.reward for e in scored}).record(),
                step_time_s=round(time.monotonic() - step_start, 2),
                **update,
            )
            metrics.append(record)
            with (request.output_dir / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(record.flat()) + "\n")
            if curves is not None:
                curves.add(step, record.flat())
            if request.on_progress is not None:
                request.on_progress(step, config.steps, record)
        return TrainResult(checkpoint=checkpoint, steps=len(metrics), metrics=metrics, wall_s=time.monotonic() - start)

    def _update(
        self,
        request: TrainRequest,
        config: TraceGrpoConfig,
        checkpoint: Path,
        triplets: list[Triplet],
        out: Path,
        step: int,
    ) -> dict[str, Any]:
        """One policy-gradient step in a child process: ``checkpoint`` + triplets -> ``out``; the figures the update
        reported (its loss, gradient norm, tokens, ...), as fields of the step's record."""
        job = UpdateJob(
            checkpoint=checkpoint,
            triplets=write_triplets(request.output_dir / f"triplets-step{step}.jsonl", triplets),
            output_dir=out,
            learning_rate=config.learning_rate,
            max_grad_norm=config.max_grad_norm,
            seed=request.seed + step,
            torch_threads=config.torch_threads,
        )
        records = self.run_worker(
            request,
            job,
            request.output_dir / f"update-step{step}.json",
            what=f"trace-grpo update {step}",
            checkpoint=out,
            mounts=(request.output_dir, checkpoint),
        )
        if not records:
            return {}
        return records[-1].model_dump(exclude={"schema_version", "step"}, exclude_defaults=True)
