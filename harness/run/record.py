"""The record of a run: its typed row, per-task outcomes and provenance manifest, written to the run folder and
appended to the results store, for every run that started (complete, failed or incomplete).
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from harness.assets.models import model_source
from harness.engines.jobs import TrainInfo
from harness.engines.signal import no_signal_line
from harness.errors import EngineError
from harness.results.store.manifest import (
    ArgsRecord,
    BackendRecord,
    DatasetRecord,
    EngineRecord,
    Manifest,
    ModelRecord,
    PhasesRecord,
    PhaseSummary,
    ResourcesRecord,
    ResumeRecord,
    ServingRecord,
    SpecRecord,
    SplitRecord,
)
from harness.results.store.schema import RunRow, TaskOutcome
from harness.results.store.store import ResultStore
from harness.run.events import Emit, ManifestUnwritable, RowRecorded
from harness.run.provenance import folder_hash, run_packages
from harness.run.state import RunState
from harness.serving.hardware import hardware
from harness.spec import BenchmarkSpec, spec_hash
from harness.spec.options import RunOptions

SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class RecordContext:
    """What the record needs besides the run's state."""

    spec: BenchmarkSpec
    spec_path: Path
    options: RunOptions
    """The options as passed."""
    resolved: RunOptions
    """The options the run used: with the profile and seed it resolved (``resolved.seed`` is set)."""
    backend: BackendRecord
    """The backend's description (its images and their digests)."""
    serving: ServingRecord | None
    """The policy server's record (starts, weight loads); None when no server started."""
    resources: ResourcesRecord | None
    """Peak memory of the run's process tree; None when nothing was sampled."""

    @property
    def seed(self) -> int:
        assert self.resolved.seed is not None, "the runner resolves the seed before anything is recorded"
        return self.resolved.seed


def recorded_env() -> dict[str, str]:
    """Harness-relevant environment variables; secrets are never read, and paths are reduced to "<path>"."""
    keep = ("HARNESS_", "VLLM_", "OMP_", "CUDA_VISIBLE")
    out: dict[str, str] = {}
    for k, v in sorted(os.environ.items()):
        if not k.startswith(keep) or any(m in k.upper() for m in SECRET_ENV_MARKERS):
            continue
        out[k] = "<path>" if os.sep in v else v
    return out


def record_run(
    state: RunState, ctx: RecordContext, status: str, failed_phase: str, note: str, store: ResultStore, emit: Emit
) -> RunRow:
    """The run's row, per-task outcomes and manifest: into the run folder and the results store; returns the row
    (and tells ``emit`` it was recorded)."""
    spec = ctx.spec
    commit, dirty = state.git
    packages = run_packages()
    for role, image in ctx.backend.images.items():
        packages[f"image:{role}"] = image.digest  # the row itself names the images that ran
    before, after = state.summaries.get("before", PhaseSummary()), state.summaries.get("after", PhaseSummary())
    eval_tasks = {e.task_id for eps in state.episodes.values() for e in eps}
    row = RunRow(
        run_id=state.run_id,
        group_id=ctx.options.group_id or state.run_id,
        benchmark=spec.name,
        profile=spec.profile,
        status=status,  # type: ignore[arg-type]
        started_at=state.started_at,
        git_commit=commit,
        git_dirty=dirty,
        spec_hash=spec_hash(spec),
        benchmark_version=spec.version,
        benchmark_sha256=folder_hash(ctx.spec_path.parent),
        dataset_sha256=state.dataset.get(spec.evaluation.split, ""),
        model=spec.model.name,
        model_hash_before=state.model_hash_before,
        model_hash_after=state.model_hash_after,
        engine="none" if ctx.options.eval_only else spec.training.engine,
        backend=ctx.options.backend,
        seed=ctx.seed,
        eval_split=spec.evaluation.split,
        n_tasks=len(eval_tasks),
        samples_per_task=spec.evaluation.samples_per_task,
        pass_before=before.pass_rate,
        ci_before_low=before.ci[0] if before.ci else None,
        ci_before_high=before.ci[1] if before.ci else None,
        pass_after=after.pass_rate,
        ci_after_low=after.ci[0] if after.ci else None,
        ci_after_high=after.ci[1] if after.ci else None,
        infra_errors_before=before.infra_errors,
        infra_errors_after=after.infra_errors,
        train_steps=state.train_steps,
        wall_setup_s=state.walls["setup"],
        wall_baseline_s=state.walls["baseline"],
        wall_train_s=state.walls["train"],
        wall_eval_s=state.walls["eval"],
        hardware=hardware(),
        packages=";".join(f"{k}={v}" for k, v in sorted(packages.items())),
        failed_phase=failed_phase,
        note=note,
    )
    outcomes = [
        TaskOutcome(
            phase=phase,  # type: ignore[arg-type]
            task_id=e.task_id,
            sample=e.sample,
            reward=e.reward,
            passed=e.passed,
            error_kind=e.error_kind,
        )
        for phase, eps in state.episodes.items()
        for e in eps
    ]
    manifest = build_manifest(state, ctx, row, packages)
    try:
        _keep_earlier_manifest(state.run_dir / "manifest.json", state.run_id)
        (state.run_dir / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n")
    except OSError as exc:  # the results store below still records the run (and its manifest)
        emit(ManifestUnwritable(state.run_dir / "manifest.json", exc.strerror or str(exc)))
    store.append_run(row, outcomes, manifest)
    emit(
        RowRecorded(
            row=row,
            results_file=store.root / spec.name / "runs.csv",
            eval_only=ctx.options.eval_only,
            evaluated=bool(state.summaries),
            before=before,
            after=after,
            no_signal=no_signal_line(state.train_metrics),
            profile=spec.profile,
            shows=spec.shows or "",
        )
    )
    return row


def build_manifest(state: RunState, ctx: RecordContext, row: RunRow, packages: dict[str, str]) -> Manifest:
    """The provenance manifest: resolved spec, options, data, model, engine, backend, phases, packages."""
    return Manifest(
        run_id=state.run_id,
        row=row,
        spec=SpecRecord(
            path=str(ctx.spec_path.relative_to(ctx.spec_path.parents[2])),
            profile=ctx.spec.profile,
            hash=row.spec_hash,
            resolved=ctx.spec.model_dump(mode="json"),
            version=ctx.spec.version,
            benchmark_folder_sha256=row.benchmark_sha256,
        ),
        args=ArgsRecord(as_passed=ctx.options.recorded(), resolved=ctx.resolved.recorded()),
        dataset=DatasetRecord(
            name=ctx.spec.dataset.name,
            source=ctx.spec.dataset.source,
            sha256=state.dataset,
            splits={split: _split_record(ctx.spec, split, *chosen) for split, chosen in state.selected.items()},
        ),
        model=ModelRecord(
            name=ctx.spec.model.name,
            hash_before=row.model_hash_before,
            hash_after=row.model_hash_after,
            source=model_source(state.base_model) if state.base_model else {},
        ),
        engine=EngineRecord(
            name=row.engine,
            steps=state.train_steps,
            resumed_from_step=state.train_resumed_step,
            tensorboard=_tensorboard_dir(state.run_dir),
            precision=_train_precision(state.run_dir),
        ),
        backend=ctx.backend,
        user_simulator=state.simulator,
        serving=ctx.serving,
        resources=ctx.resources,
        train_metrics=state.train_metrics,
        phases=PhasesRecord(
            wall_s=dict(state.walls), before=state.summaries.get("before"), after=state.summaries.get("after")
        ),
        packages=packages,
        hardware=row.hardware,
        platform={"python": platform.python_version(), "system": platform.platform()},
        environment=recorded_env(),
        resume=ResumeRecord(
            resumed_from=state.resumed_from,
            run_dir=state.run_dir.name,
            attempts=state.attempts,
            phases_done=list(state.done),
        ),
        power=state.power,
    )


def _split_record(spec: BenchmarkSpec, split: str, rows: int, sha256: str) -> SplitRecord:
    entry = spec.dataset.splits.get(split)
    select = entry.select.model_dump(mode="json") if entry is not None and entry.select is not None else None
    return SplitRecord(select=select, rows=rows, rows_sha256=sha256)


def _keep_earlier_manifest(path: Path, run_id: str) -> None:
    """A resumed attempt writes manifest.json in the same folder: keep the earlier attempt's under its run id."""
    try:
        earlier = json.loads(path.read_text()).get("run_id", "")
    except (OSError, ValueError, AttributeError):
        return
    if earlier and earlier != run_id and "/" not in earlier:
        path.replace(path.with_name(f"manifest-{earlier}.json"))


def _train_precision(run_dir: Path) -> str:
    """The training passes' arithmetic, as the engine wrote it beside the trained checkpoint
    (:class:`harness.engines.jobs.TrainInfo`); empty when it wrote none."""
    try:
        return TrainInfo.read(run_dir / "train" / "checkpoint").precision or ""
    except EngineError:
        return ""


def _tensorboard_dir(run_dir: Path) -> str:
    """The training curves' folder, relative to the run folder (``tensorboard --logdir <run>/train/tensorboard``)."""
    folder = run_dir / "train" / "tensorboard"
    return str(folder.relative_to(run_dir)) if folder.is_dir() else ""
