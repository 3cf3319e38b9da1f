"""A run's state: its options, what each phase produced, and the run folder's ``run-state.json`` (what a later
``--resume`` reads back), written and read in one place.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.results.stats.aggregate import count_samples
from harness.results.stats.summary import summarize_counts
from harness.rollout.protocol import Episode
from harness.run.resume import check_same, find_run_dir, read_state, write_state

PHASES = ("setup", "baseline", "train", "eval")


@dataclass
class RunOptions:
    benchmark: str
    profile: str | None = None
    seed: int | None = None
    group_id: str | None = None
    data_mirror: Path | None = None
    skip_baseline: bool = False
    backend: str = "local"
    results_root: Path | None = None
    ray_address: str | None = None
    """A Ray cluster for engines that train on one (verl); None: ``RAY_ADDRESS`` or a local head."""
    eval_only: bool = False
    checkpoint: Path | None = None
    """With ``eval_only``: the checkpoint to evaluate instead of the spec's model."""
    limit: int | None = None
    trials: int | None = None
    resume: str | None = None
    """Run id to resume: its folder, finished phases and last training checkpoint are reused."""


@dataclass
class PhaseSummary:
    pass_rate: float | None = None
    ci: tuple[float, float] | None = None
    n_scored: int = 0
    n_passed: int = 0
    infra_errors: int = 0
    agent_errors: int = 0
    wall_s: float = 0.0
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    """τ²'s pass^k over the tasks with scored trials (k = 1 .. their fewest scored trials, at most 16)."""


@dataclass
class RunState:
    run_id: str
    run_dir: Path
    started_at: str
    walls: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    phase: str = "setup"
    model_hash_before: str = ""
    model_hash_after: str = ""
    train_steps: int = 0
    train_metrics: list[dict[str, float]] = field(default_factory=list)
    before: PhaseSummary | None = None
    after: PhaseSummary | None = None
    episodes: dict[str, list[Episode]] = field(default_factory=dict)
    dataset: dict[str, str] = field(default_factory=dict)
    simulator: dict[str, str] = field(default_factory=dict)
    """Who played the user (benchmarks with a simulated user): model, hash or endpoint host; never a key."""
    git: tuple[str, bool] = ("unknown", True)
    """(commit, dirty) when the run started: the code that ran, even if the tree changes meanwhile."""
    done: list[str] = field(default_factory=list)
    """Phases finished, by this attempt or by the earlier attempts it resumes (saved in run-state.json)."""
    attempts: list[str] = field(default_factory=list)
    """Run ids of every attempt in this run folder, this one last."""
    resumed_from: str = ""
    checkpoint: Path | None = None
    base_model: Path | None = None
    train_resumed_step: int = 0
    saved: dict[str, Any] = field(default_factory=dict)


def new_run_id(benchmark: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{benchmark}-{stamp}-{uuid.uuid4().hex[:6]}"


def summarize(episodes: list[Episode]) -> PhaseSummary:
    """A phase's figures, from the same statistics as ``harness compare`` (:mod:`harness.results.stats.summary`)."""
    counts = count_samples([(e.task_id, e.passed, e.error_kind) for e in episodes])
    s = summarize_counts(counts)
    agent_errors = sum(1 for e in episodes if e.error_kind == "agent")
    return PhaseSummary(s.pass_rate, s.ci, s.n_samples, s.n_passed, s.infra_errors, agent_errors, 0.0, s.pass_hat_k)


def restore(state: RunState, options: RunOptions, run_id: str, spec_hash: str) -> None:
    """Continue the run folder of ``run_id``: its finished phases, hashes and attempts."""
    run_dir = find_run_dir(run_id)
    saved = read_state(run_dir)
    where = run_dir / "run-state.json"
    if saved["benchmark"] != options.benchmark:
        raise HarnessError(f"{where}: run {run_id} is of benchmark {saved['benchmark']!r}")
    check_same(where, "the resolved spec", saved["spec_hash"], spec_hash)
    if "eval" in saved["done"]:
        raise HarnessError(f"--resume {run_id}: the run already finished every phase")
    state.run_dir, state.saved = run_dir, saved
    state.attempts = [str(a) for a in saved["attempts"]]
    state.resumed_from = state.attempts[-1] if state.attempts else run_id
    state.done = [p for p in saved["done"] if p in PHASES and p != "setup"]
    state.walls.update({p: float(saved.get("walls", {}).get(p, 0.0)) for p in state.done})
    if "train" in state.done:
        checkpoint = run_dir / str(saved.get("checkpoint", ""))
        if not (checkpoint / "config.json").exists():
            state.done.remove("train")  # the trained checkpoint is gone: train again (from a saved step)
        else:
            state.checkpoint = checkpoint
            state.model_hash_after = str(saved.get("model_hash_after", ""))
            state.train_steps = int(saved.get("train_steps", 0))
            state.train_metrics = list(saved.get("train_metrics", []))


def mark_finished(state: RunState, phase: str, options: RunOptions, profile: str, seed: int, spec_hash: str) -> None:
    """Record in the run folder that ``phase`` is done, so a later ``--resume`` skips it."""
    if phase not in state.done:
        state.done.append(phase)
    checkpoint = state.checkpoint
    write_state(
        state.run_dir,
        {
            "benchmark": options.benchmark,
            "profile": profile,
            "seed": seed,
            "group_id": options.group_id or "",
            "skip_baseline": options.skip_baseline,
            "eval_only": options.eval_only,
            "eval_checkpoint": str(options.checkpoint or ""),
            "limit": options.limit,
            "trials": options.trials,
            "spec_hash": spec_hash,
            "attempts": state.attempts,
            "done": state.done,
            "dataset": state.dataset,
            "model_hash_before": state.model_hash_before,
            "model_hash_after": state.model_hash_after,
            # inside the run folder: relative (the folder may move); else (an unchanged base model) absolute
            "checkpoint": (
                str(checkpoint.relative_to(state.run_dir) if checkpoint.is_relative_to(state.run_dir) else checkpoint)
                if checkpoint
                else ""
            ),
            "train_steps": state.train_steps,
            "train_metrics": state.train_metrics,
            "walls": state.walls,
        },
    )
