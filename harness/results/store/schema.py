"""Typed schemas of the result tables: one :class:`RunRow` per run, one :class:`TaskOutcome` per sample.

Both are pydantic models with a description on every field (the tables' documentation lives here). A run row is
stored as one line of ``results/<benchmark>/runs.csv``; a run's outcomes as the lines of
``results/<benchmark>/outcomes/<run_id>.csv``. :data:`FORMAT_VERSION` is the version of both layouts; older rows
are upgraded on read by :mod:`harness.results.store.upgrade`, newer ones are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

INFRA_ERROR_KINDS: frozenset[str] = frozenset({"infra", "timeout"})
"""``error_kind`` values that are infrastructure failures, not the agent's: excluded from pass rates."""

FORMAT_VERSION = 2
"""The table format this harness writes; it reads this version and, through upgrade steps, older ones."""


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""Run ids and benchmark names become file and folder names, so they are restricted to this pattern."""

Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=200)]
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Rate = Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False)]


class RunRow(BaseModel):
    """One run (train-then-evaluate, or evaluate only) of one benchmark profile: a line of ``runs.csv``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: int = Field(default=FORMAT_VERSION, ge=1, description="Table format version of this row.")
    run_id: Name = Field(description="Unique id of the run; also the name of its outcomes and manifest files.")
    group_id: str = Field(description="Shared by the seeds of one multi-seed invocation.")
    benchmark: Name = Field(description="Benchmark name; the row lives in results/<benchmark>/runs.csv.")
    profile: str = Field(description="Spec profile the run used (e.g. smoke, full).")
    status: Literal["complete", "failed", "incomplete"] = Field(
        description="complete: every phase finished; failed: a phase raised (see failed_phase); incomplete: running "
        "or interrupted."
    )
    started_at: str = Field(description="Start time, ISO 8601 in UTC (e.g. 2025-01-31T12:00:00Z).")
    git_commit: str = Field(description="Commit of the harness checkout that ran (full sha).")
    git_dirty: bool = Field(description="Whether the checkout had uncommitted changes.")
    spec_hash: str = Field(description="Hash of the resolved benchmark spec.")
    benchmark_version: int = Field(
        default=1,
        ge=1,
        description="The spec's ``version``, bumped when the benchmark's tasks, agent or scoring change: runs of "
        "different versions measure different things and are not compared or pooled (format 2; rows of format 1 "
        "predate the column and are read as version 1, the default every spec had then).",
    )
    benchmark_sha256: str = Field(
        default="",
        description="Content hash of the benchmark folder (spec, code, data shipped in it) as the run saw it; "
        '"" in rows of format 1.',
    )
    dataset_sha256: str = Field(description="Hash of the evaluation data; runs on different data are not compared.")
    model: str = Field(description="Model name or path that was trained/evaluated.")
    model_hash_before: str = Field(description="Hash of the model weights before training.")
    model_hash_after: str = Field(description='Hash of the weights after training; "" when no training happened.')
    engine: str = Field(description="Training engine name.")
    backend: str = Field(description="Inference backend that served the model.")
    seed: int = Field(description="Random seed of this run.")
    eval_split: str = Field(description="Dataset split evaluated; runs on different splits are not compared.")
    n_tasks: NonNegInt = Field(description="Number of tasks evaluated per phase.")
    samples_per_task: NonNegInt = Field(description="Samples (attempts) per task per phase.")
    pass_before: Rate = Field(
        description="Pass rate before training: mean over tasks of each task's pass fraction over its non-infra "
        "samples (harness.results.stats.summary, as harness compare computes it); empty if not measured."
    )
    ci_before_low: Rate = Field(
        description="Lower end of the 95% CI of pass_before (Wilson over tasks; task-clustered with several "
        "samples per task). Rows written before the shared statistics path used Wilson over pooled samples."
    )
    ci_before_high: Rate = Field(description="Upper end of the 95% CI of pass_before.")
    pass_after: Rate = Field(description="Pass rate after training; empty if no training or evaluation happened.")
    ci_after_low: Rate = Field(description="Lower end of the 95% CI of pass_after.")
    ci_after_high: Rate = Field(description="Upper end of the 95% CI of pass_after.")
    infra_errors_before: NonNegInt = Field(description="Samples lost to infrastructure errors before training.")
    infra_errors_after: NonNegInt = Field(description="Samples lost to infrastructure errors after training.")
    train_steps: NonNegInt = Field(description="Optimizer steps taken.")
    wall_setup_s: NonNegFloat = Field(description="Wall time of setup (data, model, server), seconds.")
    wall_baseline_s: NonNegFloat = Field(description="Wall time of the before-training evaluation, seconds.")
    wall_train_s: NonNegFloat = Field(description="Wall time of training, seconds.")
    wall_eval_s: NonNegFloat = Field(description="Wall time of the after-training evaluation, seconds.")
    hardware: str = Field(description="Short hardware description (CPU/GPU model, count).")
    packages: str = Field(description='Key package versions, compact "name=version;..." (see packages_string).')
    failed_phase: str = Field(
        description='Phase that failed (status "failed", required) or was interrupted (status "incomplete", '
        'optional); "" for complete runs.'
    )
    note: str = Field(default="", description="Free-form note.")

    @field_validator("started_at")
    @classmethod
    def _utc_iso(cls, v: str) -> str:
        try:
            parsed = datetime.fromisoformat(v)
        except ValueError:
            raise ValueError(f"not an ISO 8601 timestamp: {v!r}") from None
        if parsed.tzinfo is None or parsed.utcoffset() != UTC.utcoffset(None):
            raise ValueError(f"must be in UTC with an explicit offset (Z or +00:00): {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> RunRow:
        for phase in ("before", "after"):
            rate = getattr(self, f"pass_{phase}")
            low, high = getattr(self, f"ci_{phase}_low"), getattr(self, f"ci_{phase}_high")
            if rate is None and (low is not None or high is not None):
                raise ValueError(f"ci_{phase}_low/high given without pass_{phase}")
            if rate is not None and low is not None and high is not None and not low <= rate <= high:
                raise ValueError(f"pass_{phase}={rate} is outside its CI [{low}, {high}]")
        if self.status == "failed" and not self.failed_phase:
            raise ValueError('failed_phase is required when status is "failed"')
        if self.status == "complete" and self.failed_phase:
            raise ValueError('failed_phase must be "" when status is "complete"')
        return self

    @property
    def started(self) -> datetime:
        """``started_at`` as an aware datetime."""
        return datetime.fromisoformat(self.started_at)

    @property
    def final_pass(self) -> float | None:
        """The pass rate after training when measured, else before."""
        return self.pass_after if self.pass_after is not None else self.pass_before

    @property
    def final_ci(self) -> tuple[float | None, float | None]:
        """The CI that goes with :attr:`final_pass`."""
        if self.pass_after is not None:
            return self.ci_after_low, self.ci_after_high
        return self.ci_before_low, self.ci_before_high


class TaskOutcome(BaseModel):
    """One sample of one task in one phase of a run: a line of ``outcomes/<run_id>.csv``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    phase: Literal["before", "after"] = Field(description="Evaluation before or after training.")
    task_id: str = Field(min_length=1, description="Task id within the benchmark's evaluation split.")
    sample: NonNegInt = Field(description="Sample index of this task in this phase (0-based).")
    reward: float = Field(allow_inf_nan=False, description="Reward the benchmark gave this sample.")
    passed: bool = Field(description="Whether the sample counts as a pass.")
    error_kind: str = Field(
        default="",
        pattern=r"^[a-z0-9_-]*$",
        description='"" when the sample ran normally; otherwise e.g. infra, timeout, parse. Only infra errors are '
        "excluded from pass rates (they are not the agent's failures) and counted separately.",
    )

    @property
    def is_infra(self) -> bool:
        """Whether this sample was lost to an infrastructure error."""
        return self.error_kind in INFRA_ERROR_KINDS


RUN_COLUMNS: tuple[str, ...] = tuple(RunRow.model_fields)
"""Column order of ``runs.csv`` (the model's field order)."""

OUTCOME_COLUMNS: tuple[str, ...] = tuple(TaskOutcome.model_fields)
"""Column order of an outcomes file."""

OPTIONAL_FLOAT_COLUMNS = frozenset(name for name in RUN_COLUMNS if name.startswith(("pass_", "ci_")))
"""Columns where an empty CSV cell means ``None``."""


def utc_now_iso() -> str:
    """The current time as an ISO 8601 UTC string with a ``Z`` suffix, second resolution (for ``started_at``)."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def packages_string(versions: Mapping[str, str]) -> str:
    """Compact ``name=version;...`` form of a package->version mapping, sorted by name (for ``packages``)."""
    for name, version in versions.items():
        if any(ch in f"{name}{version}" for ch in "=;\n"):
            raise ValueError(f"package {name!r}={version!r} contains '=', ';' or a newline")
    return ";".join(f"{name}={versions[name]}" for name in sorted(versions))


def parse_packages(text: str) -> dict[str, str]:
    """Inverse of :func:`packages_string`."""
    return dict(item.split("=", 1) for item in text.split(";") if item)
