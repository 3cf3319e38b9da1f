"""Child process of the ``trl-grpo`` engine: build the dataset, tools and reward, run ``GRPOTrainer``, save.

Run as ``python -m harness.engines.trl.worker <train-request.json>``; prints one progress record
(:mod:`harness.engines.progress`) per optimizer step: its loss, gradient norm, training reward and step time, the
step's GRPO signal, and every other number TRL logs among its metrics.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from harness.engines.curves import StepCurves
from harness.engines.jobs import TrainInfo, TrlJob
from harness.engines.progress import ProgressRecord, progress_line
from harness.engines.shaping import Shaping
from harness.engines.signal import GroupSignal, group_signal
from harness.engines.trl.engine import TrlGrpoConfig
from harness.serving.hardware import cpu_dtype


def _final_text(completion: Any) -> str:
    """The last assistant text of a conversational completion (or the text of a plain one)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant" and message.get("content"):
            content = message["content"]
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""


class SignalMeter:
    """The reward functions' values of each generation batch, kept until the step's log: TRL calls every reward
    function on the same batch in turn, the first (the task's own reward) first; the batch holds each prompt's
    ``n`` completions one after another (TRL's repeat sampler), so each block of ``n`` is a group, and the training
    reward is the functions' sum (TRL's reward weights are all 1 here). Rewards are compared in float64: TRL's own
    ``frac_reward_zero_std`` misses a group of equal rewards whose float32 mean rounds (its std is then about 1e-7,
    not 0), and such a group's advantages are noise of about 1e-3."""

    def __init__(self, n: int, first: str) -> None:
        self.n, self.first = n, first
        self.batches: list[dict[str, list[float]]] = []

    def metered(self, func: Any) -> Any:
        def reward(*args: Any, **kwargs: Any) -> list[float]:
            values = [float(v) for v in func(*args, **kwargs)]
            if func.__name__ == self.first or not self.batches:
                self.batches.append({})
            self.batches[-1][func.__name__] = values
            return values

        reward.__name__ = func.__name__  # TRL logs each reward function under its name
        return reward

    def take(self) -> GroupSignal | None:
        """The signal of the batches since the last call (None without any)."""
        training: dict[str, list[float]] = {}
        task: dict[str, list[float]] = {}
        for b, batch in enumerate(self.batches):
            totals = [sum(values) for values in zip(*batch.values(), strict=True)]
            for g in range(0, len(totals), self.n):
                training[f"{b}:{g}"] = totals[g : g + self.n]
                task[f"{b}:{g}"] = batch[self.first][g : g + self.n]
        self.batches = []
        return group_signal(training, task) if training else None


def main(job_path: str) -> int:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness.assets.data import load_split
    from harness.benchmark.messages import Message
    from harness.benchmark.protocol import Episode, Task, TrainsSingleTurn
    from harness.rollout.loading import load_benchmark
    from harness.spec import load_spec

    job = TrlJob.read(Path(job_path))
    spec = load_spec(job.spec_path, job.profile)
    bench = load_benchmark(spec, job.spec_path.parent)
    assert isinstance(bench, TrainsSingleTurn)  # the engine checked it before starting this trainer
    config = TrlGrpoConfig.model_validate(spec.training.config)
    seed = job.seed
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    precision = cpu_dtype(config.precision)
    print(f"precision: {precision} (spec: {config.precision})", flush=True)

    rows, _ = load_split(spec.dataset, spec.training.split, job.data_mirror)
    tasks = bench.tasks(rows)
    if config.train_limit:
        tasks = tasks[: config.train_limit]
    by_id = {t.id: t for t in tasks}
    dataset = Dataset.from_list([{"prompt": bench.training_prompt(t), "task_id": t.id} for t in tasks])

    shaping = Shaping.from_config(config.shaping)

    def scored(completion: Any, task_id: str) -> tuple[Episode, Task]:
        task, final = by_id[task_id], _final_text(completion)
        reward = float(bench.score(final, task))
        episode = Episode(
            task_id=task_id,
            reward=reward,
            passed=bench.passed(reward),
            messages=[Message(role="assistant", content=final).record()],
        )
        return episode, task

    def correctness(completions: list[Any], task_id: list[str], **_: Any) -> list[float]:
        return [scored(c, t)[0].reward for c, t in zip(completions, task_id, strict=True)]

    def term(name: str, weight: float) -> Any:
        def reward(completions: list[Any], task_id: list[str], **_: Any) -> list[float]:
            out = []
            for c, t in zip(completions, task_id, strict=True):
                episode, task = scored(c, t)
                out.append(weight * float(bench.shaping(episode, task).get(name, 0.0)))
            return out

        reward.__name__ = name  # TRL logs each reward function under its name
        return reward

    def overlong(completion_ids: list[list[int]], **_: Any) -> list[float]:
        limit = config.max_completion_length
        return [-shaping.length_penalty * min(1.0, len(ids) / limit) for ids in completion_ids]

    reward_funcs: list[Any] = [correctness, *(term(n, w) for n, w in shaping.weights.items())]
    if shaping.length_penalty > 0:
        reward_funcs.append(overlong)
    meter = SignalMeter(config.num_generations, correctness.__name__)
    reward_funcs = [meter.metered(f) for f in reward_funcs]
    out = job.output_dir
    batch = config.prompts_per_step * config.num_generations
    micro = config.micro_batch or batch
    if batch % micro:
        raise SystemExit(f"micro_batch {micro} does not divide prompts_per_step x num_generations = {batch}")
    # Curves for TensorBoard through transformers' own TensorBoard callback (its folder comes from this variable).
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(out / "tensorboard")
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        bf16=precision == "bfloat16",  # mixed precision: the model and its optimizer state stay float32
        seed=seed,
        data_seed=seed,
        max_steps=config.max_steps,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=batch // micro,
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
        learning_rate=config.learning_rate,
        beta=config.beta,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        temperature=config.temperature,
        logging_steps=1,
        save_strategy="no",  # resumable checkpoints are requested by the callback below, before the last step
        save_total_limit=1,
        report_to=["tensorboard"],
        dataloader_num_workers=0,
        disable_tqdm=True,
        gradient_checkpointing=config.gradient_checkpointing,
        model_init_kwargs={"dtype": torch.float32},
    )
    tokenizer = AutoTokenizer.from_pretrained(str(job.base_model))
    started = time.monotonic()
    # the groups' signal beside TRL's own curves (``harness/<metric>``: TRL logs a reward_std of its own)
    curves = StepCurves(out / "tensorboard", prefix="harness/") if StepCurves.available() else None

    class Progress(TrainerCallback):  # type: ignore[misc]
        last = started

        def on_log(
            self, _args: Any, state: Any, _control: Any, logs: dict[str, float] | None = None, **__: Any
        ) -> None:
            if not logs or "loss" not in logs:
                return
            now = time.monotonic()
            step_time_s = round(now - self.last, 3)
            self.last = now
            logged = {k.replace("/", "_"): float(v) for k, v in logs.items() if isinstance(v, int | float)}
            found = meter.take()
            signal = found.record() if found is not None else None
            if signal is not None and curves is not None:
                curves.add(int(state.global_step), signal.flat())
            record = ProgressRecord(
                step=state.global_step,
                step_time_s=step_time_s,
                loss=logged.pop("loss"),
                grad_norm=logged.pop("grad_norm", None),
                reward_mean=float(logs.get("reward", 0.0)),
                signal=signal,
                metrics=logged,
            )
            print(progress_line(record), flush=True)

    class SaveForResume(TrainerCallback):  # type: ignore[misc]
        """Save a resumable checkpoint every ``save_steps`` steps; the last step's weights are saved below."""

        def on_step_end(self, _args: Any, state: Any, control: Any, **__: Any) -> None:
            step = state.global_step
            if config.save_steps and step % config.save_steps == 0 and step < config.max_steps:
                control.should_save = True

    trainer = GRPOTrainer(
        model=str(job.base_model),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        tools=bench.training_tools() or None,
        callbacks=[Progress(), SaveForResume()],
    )
    resume = str(job.resume_from_checkpoint) if job.resume_from_checkpoint else None
    if resume:
        print(f"resuming from {resume}", flush=True)
    trainer.train(resume_from_checkpoint=resume)
    if curves is not None:
        curves.close()
    checkpoint = out / "checkpoint"
    trainer.save_model(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    TrainInfo(engine="trl-grpo", steps=trainer.state.global_step, seed=seed, precision=precision).write(checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
