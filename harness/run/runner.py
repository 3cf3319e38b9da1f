"""The plan of one run: set-up -> baseline evaluation -> training -> evaluation -> results row.

Each phase writes into ``artifacts/runs/<run_id>/`` (server and trainer logs, ``rollouts-<phase>.jsonl``,
``manifest.json``). The run's row, per-task outcomes and manifest go to the results store at the end; a run that
fails or is interrupted is still recorded, as ``failed`` (with the phase it died in) or ``incomplete``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import timing, ui
from harness.assets.data import load_split, rows_sha256
from harness.assets.models import checkpoint_hash, prepare_model
from harness.backends import get_backend
from harness.backends.tools import tool_commands
from harness.benchmark.protocol import Episode, Task, WritesNativeResults
from harness.engines import TrainRequest, check_engine, get_engine, validate_training
from harness.engines.progress import ProgressRecord
from harness.engines.signal import no_signal_line
from harness.errors import SpecError
from harness.paths import artifacts_dir, link_policy
from harness.results.store.manifest import BackendRecord, PowerRecord
from harness.results.store.schema import RunRow
from harness.results.store.store import ResultStore
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import open_benchmark
from harness.rollout.records import phase_records
from harness.rollout.tracing import TraceStore
from harness.run import events, interrupts
from harness.run.memory import TreeSampler
from harness.run.plan import RunPlan, plan_run
from harness.run.planning import profile_power, recorded_rows
from harness.run.provenance import git_state
from harness.run.record import RecordContext, record_run
from harness.run.reporter import ConsoleReporter, Reporter
from harness.run.resume import check_same, restore
from harness.run.settings import eval_settings
from harness.run.signal_forecast import predict_signal
from harness.run.state import EVALUATION_PHASE, PHASES, Evaluation, Phase, RunState, new_run_id, summarize, write_state
from harness.serving.hardware import gpu_names
from harness.serving.policy import PolicyServer
from harness.serving.simulator import SimulatorEndpoint, serves_simulator, start_user_simulator
from harness.spec import spec_hash
from harness.spec.options import RunOptions

__all__ = ["PHASES", "Runner"]


class Runner:
    """Runs one seed of one benchmark profile end to end."""

    def __init__(self, options: RunOptions, reporter: Reporter | None = None) -> None:
        self.options = options
        self.emit: Reporter = reporter or ConsoleReporter()
        """Where the run's events go (what is said about it); the progress bars draw on its console."""
        self.console = self.emit.console
        self.spec, self.bench, self.spec_path = open_benchmark(options.benchmark, options.profile)
        overrides = {k: v for k, v in (("limit", options.limit), ("samples_per_task", options.trials)) if v is not None}
        if overrides:  # command-line overrides change the resolved spec, so its hash records them
            evaluation = self.spec.evaluation.model_copy(update=overrides)
            self.spec = self.spec.model_copy(update={"evaluation": evaluation})
        self.seed = options.seed if options.seed is not None else self.spec.seeds[0]
        self.resolved = options.model_copy(update={"profile": self.spec.profile, "seed": self.seed})
        """The options with the profile and seed the run uses (what run-state.json keeps for --resume)."""
        validate_training(self.spec, self.spec_path)
        if not options.eval_only and not self.spec.trains:
            raise SpecError(f"{self.spec_path}: training: the spec has none; evaluate with --eval-only")
        if not options.eval_only:
            check_engine(self.spec, self.bench)  # a benchmark the engine cannot train stops here, before anything runs
        self.store = ResultStore(options.results_root)
        self.policy: PolicyServer | None = None
        """The run's policy model server (one process for every phase; see :mod:`harness.serving.policy`)."""
        self.memory = TreeSampler(os.getpid())
        """Peak memory of this process and its children over the run (the manifest's ``resources``)."""

    # -- phases -----------------------------------------------------------------------------------------------

    def run(self) -> RunRow:
        state = RunState(
            run_id=new_run_id(self.spec.name),
            run_dir=Path(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            git=git_state(),
        )
        self.store.check_writable(self.spec.name)
        if self.options.resume:
            restore(state, self.options, self.options.resume, spec_hash(self.spec))
        else:
            state.run_dir = artifacts_dir() / "runs" / state.run_id
        state.attempts.append(state.run_id)
        state.run_dir.mkdir(parents=True, exist_ok=True)
        self._simulator: SimulatorEndpoint | None = None
        self.backend: Any = None
        stack = contextlib.ExitStack()
        self.memory.start()
        try:
            return self._run(state, stack)
        finally:
            if self.policy is not None:
                self.policy.close()
            if self.backend is not None:
                self.backend.close()

    def _run(self, state: RunState, stack: contextlib.ExitStack) -> RunRow:
        status, failed_phase, note = "complete", "", f"resumed {state.resumed_from}" if state.resumed_from else ""
        try:  # from here on, an interrupt or error anywhere is recorded (as incomplete or failed, in "setup")
            engine = "none (eval only)" if self.options.eval_only else self.spec.training.engine
            self.emit(
                events.RunStarted(
                    state.run_id,
                    self.spec.name,
                    self.spec.profile,
                    engine,
                    self.seed,
                    self.options.backend,
                    state.run_dir,
                    state.resumed_from,
                    tuple(state.done),
                )
            )
            self.backend = get_backend(self.options.backend, run_id=state.run_id, console=self.console)
            self.labels = {"harness.run_id": state.run_id, "harness.benchmark": self.spec.name}
            stack.enter_context(tool_commands(self.backend))
            self.policy = PolicyServer(self.spec.model.name, self.spec.serving, self.backend, self.labels)
            plan = plan_run(
                eval_only=self.options.eval_only,
                skip_baseline=self.options.skip_baseline,
                done=state.done,
                trained=state.checkpoint is not None,
                simulator_on_gpu=serves_simulator(self.spec) and bool(gpu_names()),
            )
            with self._phase(state, "setup"):
                base_model, eval_tasks = self._setup(state, plan)
                self._simulator, state.simulator = start_user_simulator(
                    self.spec, state.run_dir, stack, self.backend, self.labels, self.console
                )
                if plan.early_server_waits:
                    self._launch_early(state, plan, base_model)
            self._finished(state, "setup")
            checkpoint = self.options.checkpoint or base_model
            if plan.baseline == "reuse":
                self._reuse(state, eval_tasks, "before")
            elif plan.baseline == "run":
                with self._phase(state, "baseline"):
                    self._evaluate(state, base_model, eval_tasks, "before")
                self._finished(state, "baseline")
            if plan.train == "reuse" and state.checkpoint is not None:
                checkpoint = state.checkpoint
                self.emit(events.TrainingReused(checkpoint))
            elif plan.train == "run":
                with self._phase(state, "train"):
                    checkpoint = self._train(state, base_model)
                self._finished(state, "train")
            elif self.options.checkpoint is not None:  # evaluation only, of a given checkpoint
                state.model_hash_after = checkpoint_hash(checkpoint)
            with self._phase(state, "eval"):
                self._evaluate(state, checkpoint, eval_tasks, "after")
            self._finished(state, "eval")
        except KeyboardInterrupt:
            self._record(state, "incomplete", state.phase, _join(note, "interrupted"))
            raise
        except Exception as exc:
            if interrupts.received():  # its KeyboardInterrupt was swallowed (raised where Python "ignores" errors)
                self._record(state, "incomplete", state.phase, _join(note, "interrupted"))
                raise KeyboardInterrupt from exc
            note = _join(note, f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
            self._record(state, "failed", state.phase, note)
            raise
        else:
            with interrupts.deferred():  # every phase is done: a signal now is raised once the row is written
                self._close(stack)
                return self._record(state, status, failed_phase, _join(note, no_signal_line(state.train_metrics) or ""))
        finally:
            self._close(stack)

    def _close(self, stack: contextlib.ExitStack) -> None:  # stop what the run started (a second time: nothing)
        if self.policy is not None:  # it shuts down while the row is recorded; run() waits for it
            self.policy.stop(wait=False)
        stack.close()
        self.memory.stop()

    @contextmanager
    def _phase(self, state: RunState, name: Phase) -> Iterator[None]:
        interrupts.check()  # no phase starts once a signal came
        state.phase = self.memory.label = name
        start = time.monotonic()
        try:
            yield
        finally:
            state.walls[name] = round(time.monotonic() - start, 2)

    def _launch_early(self, state: RunState, plan: RunPlan, base_model: Path) -> None:
        """Start the first evaluation's model server without waiting for it (:attr:`RunPlan.early_server`)."""
        if plan.early_server is None:
            return
        checkpoint = (self.options.checkpoint or base_model) if plan.early_server == "after" else base_model
        assert self.policy is not None
        self.policy.launch(checkpoint, state.run_dir / f"server-{plan.early_server}.log")
        timing.mark("server_launched")

    def _setup(self, state: RunState, plan: RunPlan) -> tuple[Path, list[Task]]:
        spec = self.spec
        with self.console.status("fetching dataset and preparing the model") as status:
            base_model = prepare_model(spec.model, progress=lambda msg: status.update(msg))
            state.base_model = base_model
            link_policy(base_model)  # compose's default POLICY_MODEL_PATH (./.cache/models/policy)
            timing.mark("model_ready")
            # The model server takes longest to start: the first evaluation's server boots while the data and the
            # model are verified (and the tools start), or once the user simulator serves (plan.early_server_waits).
            if not plan.early_server_waits:
                self._launch_early(state, plan, base_model)
            eval_rows, eval_file = load_split(spec.dataset, spec.evaluation.split, self.options.data_mirror)
            state.dataset[spec.evaluation.split] = eval_file.sha256
            state.selected[spec.evaluation.split] = (len(eval_rows), rows_sha256(eval_rows))
            if not self.options.eval_only and spec.training.split != spec.evaluation.split:
                train_rows, train_file = load_split(spec.dataset, spec.training.split, self.options.data_mirror)
                state.dataset[spec.training.split] = train_file.sha256
                state.selected[spec.training.split] = (len(train_rows), rows_sha256(train_rows))
            state.model_hash_before = checkpoint_hash(base_model)
        if state.saved is not None:
            where = state.run_dir / "run-state.json"
            check_same(where, "the model", state.saved.model_hash_before, state.model_hash_before)
            for split, sha in state.dataset.items():
                check_same(where, f"dataset split {split}", state.saved.dataset.get(split, ""), sha)
        tasks = self.bench.tasks(eval_rows)
        if spec.evaluation.limit:
            tasks = tasks[: spec.evaluation.limit]
        self.emit(
            events.DataReady(
                spec.dataset.name,
                spec.evaluation.split,
                len(tasks),
                eval_file.sha256,
                eval_file.origin,
                spec.model.name,
                state.model_hash_before,
                base_model,
            )
        )
        state.power = self._power(len(tasks))
        timing.mark("setup_done")
        return base_model, tasks

    def _power(self, tasks: int) -> PowerRecord | None:
        """What this run can detect, worked out before it evaluates: printed, and kept in the manifest."""
        rows, unread = recorded_rows(self.spec.name, self.options.results_root)
        found = profile_power(self.spec, tasks, rows, tasks_source=f"{self.spec.evaluation.split} split")
        what = "against another evaluation of these tasks" if self.options.eval_only else "before -> after"
        self.emit(events.PowerStated(found.line(what), unread or ""))
        signal = None if self.options.eval_only else predict_signal(self.spec, rows, self.options.results_root)
        if signal is not None:
            self.emit(events.SignalForecast(signal.line()))
        return found.record()

    def _label(self, phase: Evaluation) -> str:
        if phase == "before":
            return "baseline eval"
        return "evaluation" if self.options.eval_only else "eval after training"

    def _evaluate(self, state: RunState, checkpoint: Path, tasks: list[Task], phase: Evaluation) -> None:
        ev = self.spec.evaluation
        total = len(tasks) * ev.samples_per_task
        label = self._label(phase)
        start = time.monotonic()
        with ui.progress(self.console) as progress:
            bar = progress.add_task(f"{label}: starting model server", total=total)
            assert self.policy is not None
            with self.policy.use(checkpoint, state.run_dir / f"server-{phase}.log", wait=False) as server:

                async def ready() -> None:
                    # Awaited once the tools are up: the server keeps starting while they start.
                    await server.wait_ready_async(
                        self.spec.serving.startup_timeout_s,
                        tick=lambda s: progress.update(bar, description=f"{label}: starting model server ({s:.0f} s)"),
                    )
                    timing.mark("server_ready")
                    progress.update(bar, description=f"{label}: rollouts")

                settings = self._settings(server.endpoint.base_url, ev.temperature, ev.samples_per_task)
                passed = [0]

                def on_done(ep: Episode) -> None:
                    passed[0] += int(ep.passed)
                    progress.update(bar, advance=1, description=f"{label}: {passed[0]} passed")

                episodes = asyncio.run(
                    evaluate(self.bench, tasks, settings, state.run_dir / f"rollouts-{phase}.jsonl", on_done, ready)
                )
        state.episodes[phase] = episodes
        if isinstance(self.bench, WritesNativeResults):
            native = state.run_dir / f"native-results-{phase}.json"
            self.bench.write_native_results(episodes, native, state.native_info(self.spec, self.seed))
        summary = summarize(episodes).model_copy(update={"wall_s": time.monotonic() - start})
        state.summaries[phase] = summary
        log = state.run_dir / f"server-{phase}.log"  # named, with its first error, when no rollout was scored
        self.emit(events.EvaluationDone(label, summary, server_log=log))

    def _settings(self, base_url: str, temperature: float, n: int, trace: TraceStore | None = None) -> EvalSettings:
        return eval_settings(self.spec, self.seed, self._simulator, base_url, temperature, n, trace)

    def _train_tasks(self) -> list[Task]:
        rows, _ = load_split(self.spec.dataset, self.spec.training.split, self.options.data_mirror)
        return self.bench.tasks(rows)

    def _collect(
        self,
        state: RunState,
        checkpoint: Path,
        tasks: list[Task],
        n: int,
        temperature: float,
        out_path: Path,
        trace: TraceStore,
    ) -> list[Episode]:
        """Serve ``checkpoint`` and run ``n`` traced training rollouts of each task (for trace-based engines)."""
        assert self.policy is not None
        with self.policy.use(checkpoint, out_path.with_suffix(".server.log")) as server:
            settings = self._settings(server.endpoint.base_url, temperature, n, trace)
            return asyncio.run(evaluate(self.bench, tasks, settings, out_path))

    def _train(self, state: RunState, base_model: Path) -> Path:
        engine = get_engine(self.spec.training.engine)
        assert self.policy is not None
        self.policy.before_training(
            engine_uses_server=engine.uses_policy_server, wait=not engine.starts_while_server_stops
        )
        total = int(self.spec.training.config.get("max_steps", 0)) or None
        with ui.progress(self.console) as progress:
            bar = progress.add_task(f"training ({engine.name})", total=total)

            def on_progress(step: int, of: int, record: ProgressRecord) -> None:
                desc = f"training ({engine.name}) reward {record.reward_mean or 0.0:.3f}"
                progress.update(bar, completed=step, total=of, description=desc)

            result = engine.train(
                TrainRequest(
                    spec=self.spec,
                    spec_path=self.spec_path,
                    base_model=base_model,
                    output_dir=state.run_dir / "train",
                    seed=self.seed,
                    log_path=state.run_dir / "train.log",
                    on_progress=on_progress,
                    resume_from=state.run_dir / "train" if state.resumed_from else None,
                    backend=self.backend,
                    labels=self.labels,
                    ray_address=self.options.ray_address,
                    benchmark=self.bench,
                    tasks=self._train_tasks(),
                    collect=lambda *a: self._collect(state, *a),
                    simulator=self._simulator,
                )
            )
        timing.mark("train_done")
        # The evaluation's server boots while the checkpoint is hashed and the training phase is recorded.
        self.policy.prepare(result.checkpoint, state.run_dir / "server-after.log")
        state.checkpoint = result.checkpoint
        state.train_resumed_step = result.resumed_from_step
        state.train_steps = result.steps
        state.train_metrics = [record.flat() for record in result.metrics]
        state.model_hash_after = checkpoint_hash(result.checkpoint)
        self.emit(events.TrainingDone(result.steps, result.wall_s, state.model_hash_after))
        return result.checkpoint

    # -- resuming -------------------------------------------------------------------------------------------

    def _reuse(self, state: RunState, tasks: list[Task], phase: Evaluation) -> None:
        """An evaluation an earlier attempt finished: its records, read back instead of redone."""
        path = state.run_dir / f"rollouts-{phase}.jsonl"
        state.episodes[phase] = episodes = phase_records(path, tasks, self.spec.evaluation.samples_per_task)
        summary = summarize(episodes).model_copy(update={"wall_s": state.walls[EVALUATION_PHASE[phase]]})
        state.summaries[phase] = summary
        self.emit(events.EvaluationDone(self._label(phase), summary, reused=True))

    def _finished(self, state: RunState, phase: Phase) -> None:
        """Record in the run folder that ``phase`` is done, so a later ``--resume`` skips it."""
        if phase not in state.done:
            state.done.append(phase)
        write_state(state.run_dir, state.saved_state(self.resolved, spec_hash(self.spec)))

    def _record(self, state: RunState, status: str, failed_phase: str, note: str) -> RunRow:
        with interrupts.deferred():  # a signal that arrives meanwhile is raised once the row is written
            backend = self.backend.describe() if self.backend is not None else BackendRecord(name=self.options.backend)
            serving = self.policy.describe() if self.policy is not None else None
            resources = self.memory.record()
            ctx = RecordContext(self.spec, self.spec_path, self.options, self.resolved, backend, serving, resources)
            return record_run(state, ctx, status, failed_phase, note, self.store, self.emit)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
