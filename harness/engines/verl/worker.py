"""Child process of the ``verl`` engine: data files, VERL's trainer on Ray, step metrics, the merged checkpoint.

Run as ``python -m harness.engines.verl.worker <train-request.json>``. It writes the training and validation tasks
as VERL parquet files (each row carries the task for the agent loop), composes VERL's ``ppo_trainer`` config with
the run's keys (:func:`harness.engines.verl.engine.verl_run_config`), runs VERL's ``main_ppo`` entry point, relays each
step's metrics as one progress record (:mod:`harness.engines.progress`), and merges the last FSDP checkpoint into a
Hugging Face folder (``<output>/checkpoint``) with VERL's model merger.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.engines.curves import StepCurves
from harness.engines.jobs import TrainInfo, VerlJob
from harness.engines.progress import ProgressRecord, progress_line
from harness.engines.signal import GroupSignal, group_signal
from harness.engines.verl.compose import check, compose
from harness.engines.verl.engine import (
    AGENT_LOOP_NAME,
    AGENT_LOOP_TARGET,
    VerlConfig,
    rollout_env,
    verl_run_config,
)
from harness.engines.verl.rows import TaskRow
from harness.engines.verl.traces import read_traces, trace_lines
from harness.errors import EngineError

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)


def step_record(step: int, data: dict[str, Any]) -> ProgressRecord:
    """The harness's per-step summary of VERL's metrics (all of them stay in ``verl-metrics.jsonl``)."""

    def pick(*keys: str) -> float | None:
        for key in keys:
            if isinstance(data.get(key), int | float):
                return float(data[key])
        return None

    values = {
        "reward_mean": pick("critic/score/mean", "critic/rewards/mean"),
        "response_length_mean": pick("response_length/mean"),
        "step_time_s": pick("timing_s/step"),
        "tokens_total": pick("perf/total_num_tokens"),
        "tokens_per_s_per_gpu": pick("perf/throughput"),
    }
    for key, value in data.items():
        if re.fullmatch(r"val-core/[^/]+/acc/mean@\d+", key) and isinstance(value, int | float):
            values["val_pass_rate"] = float(value)
        if re.fullmatch(r"val-core/[^/]+/reward/mean@\d+", key) and isinstance(value, int | float):
            values.setdefault("val_reward_mean", float(value))
    if values["tokens_total"] is not None and values["step_time_s"]:
        values["tokens_per_s"] = values["tokens_total"] / values["step_time_s"]
    figures = {k: round(v, 6) for k, v in values.items() if v is not None}
    return ProgressRecord.model_validate({"step": step, **figures})


class TraceGroups:
    """The training groups of each step in the agent loop's trace (``rollout-traces.jsonl``,
    :mod:`harness.engines.verl.traces`: a line per rollout with its group's ``uid``, VERL's prompt id).

    VERL's trainer generates all of a step's rollouts before the step's update, and the next step's only after it,
    so the trace holds every rollout of step k before any of step k + 1: the groups of the k-th training step are the
    k-th ``batch`` distinct group ids (``data.train_batch_size``) in the order they first appear. Counting by order,
    not by when the relay reads the file, keeps a step's figures its own even when the next step's first rollouts are
    already written. Validation rollouts (marked by the agent loop) and lines without a ``uid`` are not counted."""

    def __init__(self, path: Path, n: int, batch: int) -> None:
        self.path, self.n, self.batch = path, n, batch
        self.offset = 0
        self.order: list[str] = []
        """Training group ids in order of first appearance."""
        self.rewards: dict[str, list[tuple[float, float]]] = {}
        """Each group's (training reward, task reward) per rollout."""

    def _read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in trace_lines(complete, self.path):  # a line cut by two writers at once is not counted
            if line.uid and not line.validation:
                if line.uid not in self.rewards:
                    self.order.append(line.uid)
                self.rewards.setdefault(line.uid, []).append((line.reward, line.task_reward))

    def take(self, index: int) -> GroupSignal | None:
        """The signal of the groups of training step ``index`` (0: the first step this run logged); None when the
        trace holds none of them, or groups of one; :class:`EngineError` for a line that is not a trace line of this
        version."""
        if self.n < 2:
            return None
        self._read()
        uids = self.order[index * self.batch : (index + 1) * self.batch]
        if not uids:
            return None
        return group_signal(
            {u: [r for r, _ in self.rewards[u]] for u in uids}, {u: [t for _, t in self.rewards[u]] for u in uids}
        )


class MetricsRelay(threading.Thread):
    """Follows VERL's file logger (one JSON object per logged step) and prints a progress line per step, with the
    group signal of the training step's rollouts (:class:`TraceGroups`) where there is one. A trace that cannot be
    read stops the relay; its error is kept in :attr:`error` for the worker to fail with once VERL returns."""

    def __init__(self, path: Path, groups: TraceGroups | None = None, curves: StepCurves | None = None) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.groups, self.curves = groups, curves
        self.stop = threading.Event()
        self.records: list[ProgressRecord] = []
        self.trained = 0
        """Training steps relayed so far."""
        self.error: EngineError | None = None

    def run(self) -> None:
        try:
            self._follow()
        except EngineError as err:
            self.error = err

    def _follow(self) -> None:
        offset = 0
        while True:
            done = self.stop.is_set()
            if self.path.exists():
                with self.path.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                offset += len(complete)
                for line in complete.splitlines():
                    entry = json.loads(line)
                    record = step_record(int(entry.get("step", 0)), entry.get("data", {}))
                    found = None
                    if record.step > 0:  # a training step (step 0: the validation before training)
                        if self.groups is not None:
                            found = self.groups.take(self.trained)
                        self.trained += 1
                    if found is not None:
                        signal = found.record()
                        record = record.model_copy(update={"signal": signal})
                        if self.curves is not None:
                            self.curves.add(record.step, signal.flat())
                    self.records.append(record)
                    print(progress_line(record), flush=True)
            if done:
                return
            time.sleep(1.0)


def write_data(job: VerlJob, config: VerlConfig, out: Path) -> tuple[Path, Path | None, int]:
    """The training and validation tasks as VERL parquet files; each row carries its task for the agent loop."""
    import pandas as pd

    from harness.assets.data import load_split
    from harness.rollout.loading import load_benchmark
    from harness.spec import load_spec

    spec_path = job.spec_path
    spec = load_spec(spec_path, job.profile)
    bench = load_benchmark(spec, spec_path.parent)
    simulator = job.simulator

    def rows(split: str, limit: int | None, validation: bool = False) -> list[dict[str, Any]]:
        split_rows, _ = load_split(spec.dataset, split, job.data_mirror)
        tasks = bench.tasks(split_rows)[: limit or None]
        return [
            {
                "data_source": spec.name,
                "agent_name": AGENT_LOOP_NAME,
                # VERL's dataset wants a chat prompt; the agent loop renders the agent's own conversation instead
                "prompt": [{"role": "user", "content": f"task {t.id}"}],
                "ability": "agent",
                "reward_model": {"style": "agent", "ground_truth": t.answer},
                "extra_info": TaskRow.of(
                    i,
                    t,
                    spec_path=str(spec_path),
                    profile=spec.profile,
                    max_turns=spec.agent.max_turns,
                    max_tokens=spec.evaluation.max_tokens,
                    seed=job.seed,
                    validation=validation,
                    shaping=config.shaping,
                    simulator_url=simulator.base_url if simulator else "",
                    simulator_model=simulator.model if simulator else "",
                ).extra_info(),
            }
            for i, t in enumerate(tasks)
        ]

    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    train = rows(spec.training.split, config.train_limit)
    if not train:
        raise SystemExit(f"no training tasks in split {spec.training.split!r}")
    train_file = data_dir / "train.parquet"
    pd.DataFrame(train).to_parquet(train_file)
    val_file = None
    if spec.training.validation_split:
        val_file = data_dir / "val.parquet"
        pd.DataFrame(rows(spec.training.validation_split, config.val_limit, validation=True)).to_parquet(val_file)
    return train_file, val_file, len(train)


def merge_checkpoint(checkpoints: Path, base_model: Path, target: Path) -> Path:
    """Merge the last saved FSDP actor into a Hugging Face folder at ``target`` (VERL's model merger)."""
    steps = sorted(
        (p for p in checkpoints.glob("global_step_*") if (p / "actor").is_dir()),
        key=lambda p: int(p.name.rsplit("_", 1)[1]),
    )
    if not steps:
        raise SystemExit(f"VERL saved no checkpoint under {checkpoints}")
    actor = steps[-1] / "actor"
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    cmd += ["--local_dir", str(actor), "--target_dir", str(target)]
    print("merging", actor, "->", target, flush=True)
    subprocess.run(cmd, check=True)
    # The tokenizer is not trained: take the base model's files, chat template included, as the server needs them.
    for name in TOKENIZER_FILES:
        src = base_model / name
        if src.exists():
            shutil.copy2(src, target / name)
    return steps[-1]


def main(job_path: str) -> int:
    import verl.trainer.main_ppo as main_ppo

    job = VerlJob.read(Path(job_path))
    from harness.spec import load_spec

    spec = load_spec(job.spec_path, job.profile)
    config = VerlConfig.model_validate(spec.training.config)
    out = job.output_dir
    out.mkdir(parents=True, exist_ok=True)
    train_file, val_file, n_train = write_data(job, config, out)
    agent_loops = out / "agent-loops.yaml"
    agent_loops.write_text(json.dumps([{"name": AGENT_LOOP_NAME, "_target_": AGENT_LOOP_TARGET}]) + "\n")
    metrics_file = out / "verl-metrics.jsonl"
    metrics_file.unlink(missing_ok=True)
    trace_file = out / "rollout-traces.jsonl"
    trace_file.unlink(missing_ok=True)

    repo_root = str(Path(__file__).resolve().parents[2])
    python_path = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p)
    env_vars = {k: v for k, v in os.environ.items() if k.startswith("HARNESS_")}
    env_vars.update(rollout_env())
    env_vars.update(
        {
            "PYTHONPATH": python_path,
            "VERL_FILE_LOGGER_PATH": str(metrics_file),
            "HARNESS_VERL_TRACE": str(trace_file),
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    os.environ["VERL_FILE_LOGGER_PATH"] = str(metrics_file)
    os.environ["HARNESS_VERL_TRACE"] = str(trace_file)
    # Curves for TensorBoard through VERL's own logger, where the tensorboard package is installed.
    tensorboard_dir = out / "tensorboard" if importlib.util.find_spec("tensorboard") else None
    if tensorboard_dir is None:
        print("verl: tensorboard is not installed; no TensorBoard curves", flush=True)
    else:
        os.environ["TENSORBOARD_DIR"] = str(tensorboard_dir)
    run_config = verl_run_config(
        config,
        model_path=str(job.base_model),
        train_file=str(train_file),
        val_file=str(val_file) if val_file else None,
        output_dir=out,
        agent_loop_config=str(agent_loops),
        seed=job.seed,
        ray_address=job.ray_address,
        env_vars=env_vars,
        tensorboard_dir=tensorboard_dir,
    )
    (out / "verl-config.json").write_text(json.dumps(run_config, indent=2, sort_keys=True) + "\n")
    print(f"verl: {n_train} training tasks; ray {run_config['ray_kwargs']['ray_init']['address']}", flush=True)

    cfg = compose(run_config)
    try:
        check(cfg)  # VERL's own check, before Ray starts: one line rather than a traceback from inside it
    except EngineError as err:
        raise SystemExit(str(err)) from None

    rollout = run_config.get("actor_rollout_ref", {}).get("rollout", {})
    n = int(rollout.get("n", config.actor_rollout_ref.rollout.n))  # the group size
    batch = int(run_config["data"]["train_batch_size"])  # groups a step
    curves = StepCurves(tensorboard_dir, prefix="harness/") if tensorboard_dir is not None else None
    relay = MetricsRelay(metrics_file, TraceGroups(trace_file, n, batch), curves)
    relay.start()
    try:
        main_ppo.main(cfg)  # hydra's entry point runs its function directly when given a config
    finally:
        relay.stop.set()
        relay.join(timeout=30)
        if curves is not None:
            curves.close()
    if relay.error is not None:
        raise SystemExit(str(relay.error))
    trained = [r for r in relay.records if r.step > 0 and r.step_time_s is not None]
    if not trained:
        raise SystemExit("VERL logged no training step: nothing was trained")
    try:
        traced = read_traces(trace_file)
    except EngineError as err:
        raise SystemExit(str(err)) from None
    llm_calls = sum(line.llm_calls for line in traced)
    if llm_calls == 0:
        raise SystemExit("the rollouts traced no LLM call of the agent: zero trainable triplets")
    checkpoint = out / "checkpoint"
    shutil.rmtree(checkpoint, ignore_errors=True)
    last = merge_checkpoint(Path(run_config["trainer"]["default_local_dir"]), job.base_model, checkpoint)
    TrainInfo(
        engine="verl",
        steps=len(trained),
        seed=job.seed,
        verl_checkpoint=last.name,
        rollouts_traced=len(traced),
        llm_calls_traced=llm_calls,
    ).write(checkpoint)
    print(f"verl: {len(trained)} steps, {len(traced)} rollouts traced ({llm_calls} LLM calls)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
