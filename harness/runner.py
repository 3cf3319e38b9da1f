"""The plan of one run: set-up -> baseline evaluation -> training -> evaluation -> results row.

Each phase writes into ``artifacts/runs/<run_id>/`` (server and trainer logs, ``rollouts-<phase>.jsonl``,
``manifest.json``). The run's row, per-task outcomes and manifest go to the results store at the end; a run that
fails or is interrupted is still recorded, as ``failed`` (with the phase it died in) or ``incomplete``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from harness import timing
from harness.backends import get_backend
from harness.benchmark import Episode, Task, open_benchmark
from harness.data import load_split
from harness.engines import TrainRequest, check_engine, get_engine
from harness.errors import HarnessError
from harness.evaluate import EvalSettings, evaluate
from harness.models import checkpoint_hash, model_source, prepare_model
from harness.paths import artifacts_dir, link_policy
from harness.policy_server import PolicyServer
from harness.provenance import git_state, hardware, run_packages
from harness.resources import TreeSampler
from harness.results.aggregate import count_samples
from harness.results.schema import RunRow, TaskOutcome
from harness.results.store import ResultStore
from harness.results.summary import summarize_counts
from harness.resume import check_same, find_run_dir, read_rollouts, read_state, write_state
from harness.serving import serve
from harness.spec import spec_hash
from harness.tools.calculator import COMMAND_ENV as CALCULATOR_ENV
from harness.tracing import TraceStore

PHASES = ("setup", "baseline", "train", "eval")
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
SIMULATOR_URL_ENV = "HARNESS_USER_SIMULATOR_URL"
SIMULATOR_MODEL_ENV = "HARNESS_USER_SIMULATOR_MODEL"
SIMULATOR_KEY_ENV = "HARNESS_USER_SIMULATOR_API_KEY"


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
    """A phase's figures, from the same statistics as ``harness compare`` (:mod:`harness.results.summary`)."""
    counts = count_samples([(e.task_id, e.passed, e.error_kind) for e in episodes])
    s = summarize_counts(counts)
    agent_errors = sum(1 for e in episodes if e.error_kind == "agent")
    return PhaseSummary(s.pass_rate, s.ci, s.n_samples, s.n_passed, s.infra_errors, agent_errors, 0.0, s.pass_hat_k)


def _recorded_env() -> dict[str, str]:
    """Harness-relevant environment variables; secrets are never read, and paths are reduced to "<path>"."""
    keep = ("HARNESS_", "VLLM_", "OMP_", "CUDA_VISIBLE")
    out: dict[str, str] = {}
    for k, v in sorted(os.environ.items()):
        if not k.startswith(keep) or any(m in k.upper() for m in SECRET_ENV_MARKERS):
            continue
        out[k] = "<path>" if os.sep in v else v
    return out


class Runner:
    """Runs one seed of one benchmark profile end to end."""

    def __init__(self, options: RunOptions, console: Console | None = None) -> None:
        self.options = options
        self.console = console or Console()
        self.spec, self.bench, self.spec_path = open_benchmark(options.benchmark, options.profile)
        overrides = {k: v for k, v in (("limit", options.limit), ("samples_per_task", options.trials)) if v is not None}
        if overrides:  # command-line overrides change the resolved spec, so its hash records them
            evaluation = self.spec.evaluation.model_copy(update=overrides)
            self.spec = self.spec.model_copy(update={"evaluation": evaluation})
        self.seed = options.seed if options.seed is not None else self.spec.seeds[0]
        if not options.eval_only:
            check_engine(self.spec, self.bench)  # a benchmark the engine cannot train stops here, before anything runs
        self.store = ResultStore(options.results_root)
        self.policy: PolicyServer | None = None
        """The run's policy model server (one process for every phase; see :mod:`harness.policy_server`)."""
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
            self._restore(state, self.options.resume)
        else:
            state.run_dir = artifacts_dir() / "runs" / state.run_id
        state.attempts.append(state.run_id)
        state.run_dir.mkdir(parents=True, exist_ok=True)
        status, failed_phase, note = "complete", "", f"resumed {state.resumed_from}" if state.resumed_from else ""
        previous_calc = os.environ.get(CALCULATOR_ENV)
        self._simulator: tuple[str, str, str] | None = None
        self.backend: Any = None
        stack = contextlib.ExitStack()
        self.memory.start()
        try:  # from here on, an interrupt or error anywhere is recorded (as incomplete or failed, in "setup")
            engine = "none (eval only)" if self.options.eval_only else self.spec.training.engine
            self.console.print(
                f"[bold]run[/] {state.run_id}  benchmark={self.spec.name} profile={self.spec.profile} "
                f"engine={engine} seed={self.seed} backend={self.options.backend}"
            )
            self.console.print(f"  artifacts: {state.run_dir}")
            if state.resumed_from:
                self.console.print(f"  resuming {state.resumed_from}: finished phases {', '.join(state.done)}")
            self.backend = get_backend(self.options.backend, run_id=state.run_id, console=self.console)
            self.labels = {"harness.run_id": state.run_id, "harness.benchmark": self.spec.name}
            os.environ[CALCULATOR_ENV] = json.dumps(self.backend.calculator_command())
            self.policy = PolicyServer(self.spec.model.name, self.spec.serving, self.backend, self.labels)
            with self._phase(state, "setup"):
                base_model, eval_tasks = self._setup(state)
                self._simulator = self._start_simulator(state, stack)
            self._finished(state, "setup")
            if self.options.eval_only:
                checkpoint = self.options.checkpoint or base_model
                if self.options.checkpoint is not None:
                    state.model_hash_after = checkpoint_hash(checkpoint)
            else:
                if not self.options.skip_baseline:
                    if "baseline" in state.done:
                        state.before = self._reuse(state, eval_tasks, "before")
                    else:
                        with self._phase(state, "baseline"):
                            state.before = self._evaluate(state, base_model, self.spec.model.name, eval_tasks, "before")
                        self._finished(state, "baseline")
                if "train" in state.done and state.checkpoint is not None:
                    checkpoint = state.checkpoint
                    self.console.print(f"  training: reused (finished by an earlier attempt), checkpoint {checkpoint}")
                else:
                    with self._phase(state, "train"):
                        checkpoint = self._train(state, base_model)
                    self._finished(state, "train")
            with self._phase(state, "eval"):
                state.after = self._evaluate(state, checkpoint, self.spec.model.name, eval_tasks, "after")
            self._finished(state, "eval")
        except KeyboardInterrupt:
            status, failed_phase = "incomplete", state.phase
            note = _join(note, "interrupted")
            self._record(state, status, failed_phase, note)
            raise
        except Exception as exc:
            status, failed_phase = "failed", state.phase
            note = _join(note, f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
            self._record(state, status, failed_phase, note)
            raise
        finally:
            if self.policy is not None:
                self.policy.close()
            stack.close()
            self.memory.stop()
            if self.backend is not None:
                self.backend.close()
            if previous_calc is None:
                os.environ.pop(CALCULATOR_ENV, None)
            else:
                os.environ[CALCULATOR_ENV] = previous_calc
        return self._record(state, status, failed_phase, note)

    @contextmanager
    def _phase(self, state: RunState, name: str) -> Iterator[None]:
        state.phase = self.memory.label = name
        start = time.monotonic()
        try:
            yield
        finally:
            state.walls[name] = round(time.monotonic() - start, 2)

    def _setup(self, state: RunState) -> tuple[Path, list[Task]]:
        spec = self.spec
        with self.console.status("fetching dataset and preparing the model") as status:
            base_model = prepare_model(spec.model, progress=lambda msg: status.update(msg))
            state.base_model = base_model
            link_policy(base_model)  # compose's default POLICY_MODEL_PATH (./.cache/models/policy)
            timing.mark("model_ready")
            # The model server takes longest to start: the first evaluation's server boots while the data and the
            # model are verified (and the tools start).
            first: tuple[str, Path] | None = None
            if self.options.eval_only:
                first = ("after", self.options.checkpoint or base_model)
            elif not self.options.skip_baseline and "baseline" not in state.done:  # a resumed baseline is reused
                first = ("before", base_model)
            if first is not None:
                phase, checkpoint = first
                assert self.policy is not None
                self.policy.launch(checkpoint, state.run_dir / f"server-{phase}.log")
                timing.mark("server_launched")
            eval_rows, eval_file = load_split(spec.dataset, spec.evaluation.split, self.options.data_mirror)
            state.dataset[spec.evaluation.split] = eval_file.sha256
            if spec.training.split != spec.evaluation.split:
                _, train_file = load_split(spec.dataset, spec.training.split, self.options.data_mirror)
                state.dataset[spec.training.split] = train_file.sha256
            state.model_hash_before = checkpoint_hash(base_model)
        if state.saved:
            where = state.run_dir / "run-state.json"
            check_same(where, "the model", state.saved.get("model_hash_before", ""), state.model_hash_before)
            for split, sha in state.dataset.items():
                check_same(where, f"dataset split {split}", state.saved.get("dataset", {}).get(split, ""), sha)
        tasks = self.bench.tasks(eval_rows)
        if spec.evaluation.limit:
            tasks = tasks[: spec.evaluation.limit]
        self.console.print(
            f"  data: {spec.dataset.name} {spec.evaluation.split}={len(tasks)} tasks "
            f"(sha256 {eval_file.sha256[:12]}, from {eval_file.origin})"
        )
        self.console.print(f"  model: {spec.model.name} {state.model_hash_before[:12]} at {base_model}")
        timing.mark("setup_done")
        return base_model, tasks

    def _start_simulator(self, state: RunState, stack: contextlib.ExitStack) -> tuple[str, str, str] | None:
        """The user simulator for the whole run: (base_url, model, api_key). Served here unless the environment
        names an external endpoint."""
        sim = self.spec.user_simulator
        if sim is None:
            return None
        url = os.environ.get(SIMULATOR_URL_ENV)
        if url:
            model = os.environ.get(SIMULATOR_MODEL_ENV) or sim.model.name
            from urllib.parse import urlsplit

            state.simulator = {"source": "endpoint", "model": model, "host": urlsplit(url).hostname or ""}
            self.console.print(f"  user simulator: {model} at external endpoint {state.simulator['host']}")
            return url, model, os.environ.get(SIMULATOR_KEY_ENV, "EMPTY")
        with self.console.status("preparing the user-simulator model"):
            checkpoint = prepare_model(sim.model)
            digest = checkpoint_hash(checkpoint)
        state.simulator = {"source": "served", "model": sim.model.name, "hash": digest}
        with self._progress() as progress:
            bar = progress.add_task("user simulator: starting model server", total=None)
            server = stack.enter_context(
                serve(
                    checkpoint,
                    f"user-simulator-{sim.model.name}",
                    self.spec.serving,
                    state.run_dir / "server-user-simulator.log",
                    tick=lambda s: progress.update(bar, description=f"user simulator: starting ({s:.0f} s)"),
                    backend=self.backend,
                    labels={**self.labels, "harness.role": "user-simulator"},
                )
            )
        self.console.print(f"  user simulator: {sim.model.name} {digest[:12]} served for the run (never trained)")
        return server.endpoint.base_url, server.endpoint.model, "EMPTY"

    def _evaluate(self, state: RunState, checkpoint: Path, name: str, tasks: list[Task], phase: str) -> PhaseSummary:
        ev = self.spec.evaluation
        total = len(tasks) * ev.samples_per_task
        label = "baseline eval" if phase == "before" else "eval after training"
        start = time.monotonic()
        with self._progress() as progress:
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
        native = getattr(self.bench, "write_native_results", None)
        if native is not None:
            native(episodes, state.run_dir / f"native-results-{phase}.json", self._native_info(state))
        summary = summarize(episodes)
        summary.wall_s = time.monotonic() - start
        self._print_summary(label, summary)
        return summary

    def _settings(self, base_url: str, temperature: float, n: int, trace: TraceStore | None = None) -> EvalSettings:
        ev, sim = self.spec.evaluation, self._simulator
        return EvalSettings(
            base_url=base_url,
            model=self.spec.model.name,
            temperature=temperature,
            max_tokens=ev.max_tokens,
            max_turns=self.spec.agent.max_turns,
            concurrency=ev.concurrency,
            samples_per_task=n,
            request_timeout_s=ev.request_timeout_s,
            retries=ev.retries,
            seed=self.seed,
            simulator_url=sim[0] if sim else None,
            simulator_model=sim[1] if sim else "",
            simulator_api_key=sim[2] if sim else "EMPTY",
            trace=trace,
        )

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
        self.policy.before_training(engine_uses_server=bool(getattr(engine, "uses_policy_server", False)))
        total = int(self.spec.training.config.get("max_steps", 0)) or None
        with self._progress() as progress:
            bar = progress.add_task(f"training ({engine.name})", total=total)

            def on_progress(step: int, of: int, metrics: dict[str, float]) -> None:
                desc = f"training ({engine.name}) reward {metrics.get('reward_mean', 0.0):.3f}"
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
        state.checkpoint = result.checkpoint
        state.train_resumed_step = result.resumed_from_step
        state.train_steps = result.steps
        state.train_metrics = result.metrics
        state.model_hash_after = checkpoint_hash(result.checkpoint)
        self.console.print(
            f"  trained {result.steps} steps in {result.wall_s:.0f} s; checkpoint {state.model_hash_after[:12]}"
        )
        return result.checkpoint

    # -- resuming -------------------------------------------------------------------------------------------

    def _restore(self, state: RunState, run_id: str) -> None:
        """Continue the run folder of ``run_id``: its finished phases, hashes and attempts."""
        run_dir = find_run_dir(run_id)
        saved = read_state(run_dir)
        where = run_dir / "run-state.json"
        if saved["benchmark"] != self.options.benchmark:
            raise HarnessError(f"{where}: run {run_id} is of benchmark {saved['benchmark']!r}")
        check_same(where, "the resolved spec", saved["spec_hash"], spec_hash(self.spec))
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

    def _reuse(self, state: RunState, tasks: list[Task], phase: str) -> PhaseSummary:
        """A phase an earlier attempt finished: its records, read back instead of redone."""
        episodes = read_rollouts(
            state.run_dir / f"rollouts-{phase}.jsonl", tasks, self.spec.evaluation.samples_per_task
        )
        state.episodes[phase] = episodes
        summary = summarize(episodes)
        summary.wall_s = state.walls["baseline" if phase == "before" else "eval"]
        label = "baseline eval" if phase == "before" else "eval after training"
        self._print_summary(f"{label} (reused, finished by an earlier attempt)", summary)
        return summary

    def _finished(self, state: RunState, phase: str) -> None:
        """Record in the run folder that ``phase`` is done, so a later ``--resume`` skips it."""
        if phase not in state.done:
            state.done.append(phase)
        checkpoint = state.checkpoint
        write_state(
            state.run_dir,
            {
                "benchmark": self.options.benchmark,
                "profile": self.spec.profile,
                "seed": self.seed,
                "group_id": self.options.group_id or "",
                "skip_baseline": self.options.skip_baseline,
                "eval_only": self.options.eval_only,
                "eval_checkpoint": str(self.options.checkpoint or ""),
                "limit": self.options.limit,
                "trials": self.options.trials,
                "spec_hash": spec_hash(self.spec),
                "attempts": state.attempts,
                "done": state.done,
                "dataset": state.dataset,
                "model_hash_before": state.model_hash_before,
                "model_hash_after": state.model_hash_after,
                # inside the run folder: relative (the folder may move); else (an unchanged base model) absolute
                "checkpoint": (
                    str(
                        checkpoint.relative_to(state.run_dir)
                        if checkpoint.is_relative_to(state.run_dir)
                        else checkpoint
                    )
                    if checkpoint
                    else ""
                ),
                "train_steps": state.train_steps,
                "train_metrics": state.train_metrics,
                "walls": state.walls,
            },
        )

    def _native_info(self, state: RunState) -> dict[str, Any]:
        return {
            "git_commit": state.git[0],
            "seed": self.seed,
            "num_trials": self.spec.evaluation.samples_per_task,
            "policy_model": self.spec.model.name,
            "user_model": state.simulator.get("model", ""),
            "temperature": self.spec.evaluation.temperature,
            "user_temperature": self.spec.user_simulator.temperature if self.spec.user_simulator else 0.0,
        }

    # -- output ---------------------------------------------------------------------------------------------

    def _progress(self) -> Progress:
        return Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )

    def _print_summary(self, label: str, s: PhaseSummary) -> None:
        if s.pass_rate is None or s.ci is None:
            self.console.print(f"  {label}: no scored rollouts ({s.infra_errors} infra errors)")
            return
        self.console.print(
            f"  {label}: pass@1 {s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}] "
            f"({s.n_passed}/{s.n_scored}; infra errors {s.infra_errors}, agent errors {s.agent_errors})"
        )
        if len(s.pass_hat_k) > 1:
            self.console.print("    " + "  ".join(f"pass^{k} {v:.1%}" for k, v in s.pass_hat_k.items()))

    def _backend_info(self) -> dict[str, Any]:
        return self.backend.describe() if self.backend is not None else {"name": self.options.backend}

    def _record(self, state: RunState, status: str, failed_phase: str, note: str) -> RunRow:
        spec = self.spec
        commit, dirty = state.git
        packages = run_packages()
        for role, image in self._backend_info().get("images", {}).items():
            packages[f"image:{role}"] = image.get("digest", "")  # the row itself names the images that ran
        before, after = state.before or PhaseSummary(), state.after or PhaseSummary()
        eval_tasks = {e.task_id for eps in state.episodes.values() for e in eps}
        row = RunRow(
            run_id=state.run_id,
            group_id=self.options.group_id or state.run_id,
            benchmark=spec.name,
            profile=spec.profile,
            status=status,  # type: ignore[arg-type]
            started_at=state.started_at,
            git_commit=commit,
            git_dirty=dirty,
            spec_hash=spec_hash(spec),
            dataset_sha256=state.dataset.get(spec.evaluation.split, ""),
            model=spec.model.name,
            model_hash_before=state.model_hash_before,
            model_hash_after=state.model_hash_after,
            engine="none" if self.options.eval_only else spec.training.engine,
            backend=self.options.backend,
            seed=self.seed,
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
        manifest = self._manifest(state, row, packages)
        try:
            _keep_earlier_manifest(state.run_dir / "manifest.json", state.run_id)
            (state.run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        except OSError as exc:  # the results store below still records the run (and its manifest)
            self.console.print(f"  warning: cannot write {state.run_dir / 'manifest.json'}: {exc.strerror}")
        self.store.append_run(row, outcomes, manifest)
        self.console.print(
            f"[bold]{status}[/] {state.run_id}: row appended to {self.store.root / spec.name / 'runs.csv'}"
        )
        if state.before is not None or state.after is not None:
            self.console.print(
                f"[bold]pass@1[/] before {_fmt(before)}  ->  after {_fmt(after)}  "
                f"(model {row.model_hash_before[:12]} -> {row.model_hash_after[:12] or 'untrained'})"
            )
        return row

    def _manifest(self, state: RunState, row: RunRow, packages: dict[str, str]) -> dict[str, Any]:
        return {
            "format_version": 1,
            "run_id": state.run_id,
            "row": row.model_dump(mode="json"),
            "spec": {
                "path": str(self.spec_path.relative_to(self.spec_path.parents[2])),
                "profile": self.spec.profile,
                "hash": row.spec_hash,
                "resolved": self.spec.model_dump(mode="json"),
            },
            "args": {
                "as_passed": {
                    k: ("<path>" if isinstance(v, Path) else str(v))
                    for k, v in asdict(self.options).items()
                    if v is not None
                }
            },
            "dataset": {"name": self.spec.dataset.name, "source": self.spec.dataset.source, "sha256": state.dataset},
            "model": {
                "name": self.spec.model.name,
                "hash_before": row.model_hash_before,
                "hash_after": row.model_hash_after,
                "source": model_source(state.base_model) if state.base_model else {},
            },
            "engine": {
                "name": row.engine,
                "steps": state.train_steps,
                "resumed_from_step": state.train_resumed_step,
                "tensorboard": _tensorboard_dir(state.run_dir),
            },
            "backend": self._backend_info(),
            "user_simulator": state.simulator or None,
            "serving": self.policy.describe() if self.policy is not None else {},
            "resources": self.memory.record(),
            "train_metrics": state.train_metrics,
            "phases": {
                "wall_s": state.walls,
                "before": asdict(state.before) if state.before else None,
                "after": asdict(state.after) if state.after else None,
            },
            "packages": packages,
            "hardware": row.hardware,
            "platform": {"python": platform.python_version(), "system": platform.platform()},
            "environment": _recorded_env(),
            "resume": {
                "resumed_from": state.resumed_from,
                "run_dir": state.run_dir.name,
                "attempts": state.attempts,
                "phases_done": state.done,
            },
        }


def _keep_earlier_manifest(path: Path, run_id: str) -> None:
    """A resumed attempt writes manifest.json in the same folder: keep the earlier attempt's under its run id."""
    try:
        earlier = json.loads(path.read_text()).get("run_id", "")
    except (OSError, ValueError, AttributeError):
        return
    if earlier and earlier != run_id and "/" not in earlier:
        path.replace(path.with_name(f"manifest-{earlier}.json"))


def _tensorboard_dir(run_dir: Path) -> str:
    """The training curves' folder, relative to the run folder (``tensorboard --logdir <run>/train/tensorboard``)."""
    folder = run_dir / "train" / "tensorboard"
    return str(folder.relative_to(run_dir)) if folder.is_dir() else ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _fmt(s: PhaseSummary) -> str:
    if s.pass_rate is None or s.ci is None:
        return "n/a"
    return f"{s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}]"
