"""A run's state: what each phase produced (:class:`RunState`, in memory) and what a later ``--resume`` reads back
(:class:`SavedState`, the run folder's ``run-state.json``): one typed, versioned model for its writer and readers.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.benchmark.protocol import Episode
from harness.records import Versions
from harness.results.stats.aggregate import count_samples
from harness.results.stats.summary import summarize_counts
from harness.results.store.atomic import atomic_write
from harness.results.store.manifest import PhaseSummary, PowerRecord, SimulatorRecord
from harness.spec import BenchmarkSpec
from harness.spec.options import RunOptions

Phase = Literal["setup", "baseline", "train", "eval"]
PHASES: tuple[Phase, ...] = ("setup", "baseline", "train", "eval")
"""A run's phases in order. The two evaluations' records are named by when they measure the model: ``before``
(the baseline phase) and ``after`` (the eval phase)."""
Evaluation = Literal["before", "after"]
EVALUATION_PHASE: dict[Evaluation, Phase] = {"before": "baseline", "after": "eval"}

STATE_FILE = "run-state.json"
STATE_VERSION = 2


class SavedState(BaseModel):
    """``run-state.json``: written after every finished phase, read by ``harness run --resume``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[2] = STATE_VERSION
    options: RunOptions = Field(description="What the run was asked, resolved (profile and seed set).")
    spec_hash: str
    attempts: list[str] = Field(description="Run ids of every attempt in this folder, oldest first.")
    done: list[Phase] = Field(description="Phases finished, by any attempt.")
    dataset: dict[str, str] = Field(default_factory=dict, description="Split -> sha256 found in set-up.")
    model_hash_before: str = ""
    model_hash_after: str = ""
    checkpoint: str = Field("", description="The trained checkpoint: relative to the run folder when inside it.")
    train_steps: int = 0
    train_metrics: list[dict[str, float]] = Field(default_factory=list)
    walls: dict[Phase, float] = Field(default_factory=dict)


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 1 kept the options flat beside the rest."""
    option_keys = {"benchmark", "profile", "seed", "group_id", "skip_baseline", "eval_only", "limit", "trials"}
    options = {k: raw[k] for k in option_keys if raw.get(k) not in (None, "")}
    if raw.get("eval_checkpoint"):
        options["checkpoint"] = raw["eval_checkpoint"]
    kept = {k: v for k, v in raw.items() if k not in option_keys | {"version", "eval_checkpoint"}}
    return {**kept, "version": 2, "options": options}


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_FILE


def write_state(run_dir: Path, state: SavedState) -> None:
    """Replace the run folder's state file atomically (a crash leaves the previous state)."""
    text = json.dumps(state.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    atomic_write(state_path(run_dir), text.encode())


VERSIONS = Versions("run state", STATE_VERSION, {1: _v1_to_v2}, key="version")
"""The saved state's versions: ``run-state.json`` of version 1 is upgraded on read."""


def read_state(run_dir: Path) -> SavedState:
    """The saved state of a run folder (an older version upgraded); every problem is a one-line error."""
    return VERSIONS.read(state_path(run_dir), SavedState)


@dataclass
class RunState:
    """What one attempt of a run has produced so far (in memory; :class:`SavedState` is what is kept)."""

    run_id: str
    run_dir: Path
    started_at: str
    walls: dict[Phase, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    phase: Phase = "setup"
    model_hash_before: str = ""
    model_hash_after: str = ""
    train_steps: int = 0
    train_metrics: list[dict[str, float]] = field(default_factory=list)
    summaries: dict[Evaluation, PhaseSummary] = field(default_factory=dict)
    episodes: dict[Evaluation, list[Episode]] = field(default_factory=dict)
    dataset: dict[str, str] = field(default_factory=dict)
    selected: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Split -> (rows selected, sha256 of those rows): which rows of the file the run used."""
    simulator: SimulatorRecord | None = None
    """Who played the user (benchmarks with a simulated user); never a key."""
    git: tuple[str, bool] = ("unknown", True)
    """(commit, dirty) when the run started: the code that ran, even if the tree changes meanwhile."""
    done: list[Phase] = field(default_factory=list)
    """Phases finished, by this attempt or by the earlier attempts it resumes (saved in run-state.json)."""
    attempts: list[str] = field(default_factory=list)
    """Run ids of every attempt in this run folder, this one last."""
    resumed_from: str = ""
    checkpoint: Path | None = None
    base_model: Path | None = None
    train_resumed_step: int = 0
    saved: SavedState | None = None
    """The state an earlier attempt saved (a resumed run)."""
    power: PowerRecord | None = None
    """What the run could detect, worked out at set-up (the manifest's ``power``)."""

    def saved_state(self, options: RunOptions, spec_hash: str) -> SavedState:
        checkpoint = self.checkpoint
        if checkpoint is None:
            where = ""
        elif checkpoint.is_relative_to(self.run_dir):  # inside the run folder: relative (the folder may move)
            where = str(checkpoint.relative_to(self.run_dir))
        else:  # an unchanged base model
            where = str(checkpoint)
        return SavedState(
            options=options,
            spec_hash=spec_hash,
            attempts=self.attempts,
            done=self.done,
            dataset=self.dataset,
            model_hash_before=self.model_hash_before,
            model_hash_after=self.model_hash_after,
            checkpoint=where,
            train_steps=self.train_steps,
            train_metrics=self.train_metrics,
            walls=self.walls,
        )

    def native_info(self, spec: BenchmarkSpec, seed: int) -> dict[str, Any]:
        """What a benchmark's own results file records of the run (``Benchmark.write_native_results``)."""
        return {
            "git_commit": self.git[0],
            "seed": seed,
            "num_trials": spec.evaluation.samples_per_task,
            "policy_model": spec.model.name,
            "user_model": self.simulator.model if self.simulator else "",
            "temperature": spec.evaluation.temperature,
            "user_temperature": spec.user_simulator.temperature if spec.user_simulator else 0.0,
        }


def new_run_id(benchmark: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{benchmark}-{stamp}-{uuid.uuid4().hex[:6]}"


def summarize(episodes: list[Episode]) -> PhaseSummary:
    """An evaluation's figures, from the same statistics as ``harness compare`` (:mod:`harness.results.stats`)."""
    counts = count_samples([(e.task_id, e.passed, e.error_kind) for e in episodes])
    s = summarize_counts(counts)
    agent_errors = sum(1 for e in episodes if e.error_kind == "agent")
    failures = Counter(str(e.info["failure"]) for e in episodes if e.info.get("failure"))
    return PhaseSummary(
        pass_rate=s.pass_rate,
        ci=s.ci,
        n_scored=s.n_samples,
        n_passed=s.n_passed,
        infra_errors=s.infra_errors,
        agent_errors=agent_errors,
        pass_hat_k=s.pass_hat_k,
        failures=dict(sorted(failures.items())),
    )
