"""The ``harness`` command. Commands parse arguments and call library functions; nothing else lives here.

User errors (:class:`~harness.errors.HarnessError`) print as one line and exit 2; a crashed or killed server or
trainer (:class:`~harness.errors.RunFailure`) prints as one line and exits 1; Ctrl-C exits 130.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness.errors import HarnessError
from harness.run import interrupts

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train tool-using LLM agents with RL and measure whether they got better.",
)
console = Console(soft_wrap=True)
err_console = Console(stderr=True)

ProfileOpt = Annotated[str | None, typer.Option("--profile", "-p", help="Spec profile (default: the spec's).")]
MirrorOpt = Annotated[
    Path | None,
    typer.Option("--data-mirror", help="Offline dataset mirror (<dir>/<dataset>/<file>); env HARNESS_DATA_MIRROR."),
]


@app.command("list")
def list_benchmarks() -> None:
    """List benchmarks and their profiles."""
    from harness.rollout.loading import available_benchmarks, spec_path
    from harness.spec import default_profile, profile_names

    for name in available_benchmarks():
        path = spec_path(name)
        default = default_profile(path)
        profiles = ", ".join(p + (" (default)" if p == default else "") for p in profile_names(path))
        console.print(f"[bold]{name}[/]  profiles: {profiles}")


@app.command()
def validate(
    benchmark: Annotated[str, typer.Argument(help="Benchmark name, or a path to a spec.yaml.")],
    profile: ProfileOpt = None,
) -> None:
    """Validate a spec (every profile unless --profile is given): the YAML, the benchmark's code (imported, its
    class registered with every required hook) and that each profile's engine can train it, with what it detects
    and, when it trains, the share of GRPO groups expected to differ in the task's reward (`harness power`)."""
    from harness.engines import check_engine, load_checked_spec
    from harness.rollout.loading import load_benchmark, spec_path
    from harness.run.planning import profile_power, recorded_rows, task_count
    from harness.run.signal_forecast import predict_signal
    from harness.spec import profile_names

    path = Path(benchmark) if benchmark.endswith((".yaml", ".yml")) else spec_path(benchmark)
    profiles = [profile] if profile else profile_names(path)
    specs = [load_checked_spec(path, p) for p in profiles]  # the file's own errors first, then the code's
    for spec in specs:
        bench = load_benchmark(spec, path.parent)
        if spec.trains:
            check_engine(spec, bench)
        engine = spec.training.engine if spec.trains else "none (evaluation only)"
        tasks, source = task_count(spec, bench)
        rows, _ = recorded_rows(spec.name)
        power = profile_power(spec, tasks, rows, tasks_source=source, cross_runs=False).line()
        console.print(
            f"ok  {path} profile={spec.profile} model={spec.model.name} engine={engine}  {power}", highlight=False
        )
        signal = predict_signal(spec, rows)
        if signal is not None:
            console.print(f"      signal: {signal.line()}", highlight=False)


@app.command()
def engines(name: Annotated[str | None, typer.Argument(help="An engine: its training.config keys.")] = None) -> None:
    """List the training engines, or one engine's training.config keys with their types and defaults."""
    from harness.engines import engine_names, get_engine_class
    from harness.engines.keys import config_keys

    if name is None:
        for engine in engine_names():
            doc = " ".join((get_engine_class(engine).__doc__ or "").split())
            console.print(f"[bold]{engine}[/]  {doc}", highlight=False)
        return
    for key in config_keys(get_engine_class(name).config_model):
        console.print(f"{key.name}: {key.type} = {key.default}  {key.description}", markup=False, highlight=False)


@app.command()
def prepare(benchmark: str, profile: ProfileOpt = None, data_mirror: MirrorOpt = None) -> None:
    """Fetch and verify the dataset and prepare the model checkpoint (cached)."""
    from harness.assets.data import fetch_split
    from harness.assets.models import checkpoint_hash, prepare_model
    from harness.paths import link_policy
    from harness.rollout.loading import open_benchmark

    spec, _, _ = open_benchmark(benchmark, profile)
    for split in spec.dataset.splits:
        resolved = fetch_split(spec.dataset, split, data_mirror)
        console.print(f"data  {spec.dataset.name}/{split}  sha256 {resolved.sha256[:12]}  ({resolved.origin})")
    with console.status(f"preparing model {spec.model.name}") as status:
        path = prepare_model(spec.model, progress=lambda msg: status.update(msg))
    console.print(f"model {spec.model.name}  {checkpoint_hash(path)[:12]}  {path}")
    link = link_policy(path)
    if link is not None:
        console.print(f"      linked as {link} (compose's default POLICY_MODEL_PATH)")


@app.command()
def run(
    benchmark: Annotated[str | None, typer.Argument(help="Benchmark name (optional with --resume).")] = None,
    profile: ProfileOpt = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Repeat train-then-evaluate with N seeds.")] = 1,
    seed: Annotated[int | None, typer.Option("--seed", help="First seed (default: the spec's).")] = None,
    data_mirror: MirrorOpt = None,
    skip_baseline: Annotated[bool, typer.Option("--skip-baseline", help="Do not evaluate the base model.")] = False,
    backend: Annotated[
        str, typer.Option("--backend", help="Where processes run: local, docker, or auto (docker when available).")
    ] = "auto",
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster for the verl engine (default: RAY_ADDRESS, else a local head on this machine).",
        ),
    ] = None,
    eval_only: Annotated[
        bool,
        typer.Option(
            "--eval-only",
            help="No training: evaluate the model (or --checkpoint) once (a profile without training does).",
        ),
    ] = False,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="With --eval-only: a checkpoint folder to evaluate.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Evaluate only the first N tasks (overrides the spec).")
    ] = None,
    trials: Annotated[
        int | None, typer.Option("--trials", min=1, help="Samples per task, for pass^k (overrides the spec).")
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            metavar="RUN_ID",
            help="Continue a failed or interrupted run in its folder: skip finished phases, continue training from "
            "its last checkpoint, reuse finished rollouts; appends a new row naming the run it resumed.",
        ),
    ] = None,
) -> None:
    """Train then evaluate a benchmark profile and append the results row(s)."""
    from harness import timing

    timing.mark("cli")
    from harness.run.reporter import ConsoleReporter
    from harness.run.seeds import pooled_lines, run_seeds, seed_list
    from harness.spec.options import RunOptions

    if data_mirror is not None and not data_mirror.is_dir():
        raise HarnessError(f"--data-mirror {data_mirror}: not a directory")
    if resume is not None:
        given = {
            "--profile": profile,
            "--seed": seed,
            "--seeds": seeds if seeds != 1 else None,
            "--skip-baseline": skip_baseline or None,
            "--eval-only": eval_only or None,
            "--checkpoint": checkpoint,
            "--limit": limit,
            "--trials": trials,
        }
        _resume(resume, benchmark, [k for k, v in given.items() if v is not None], data_mirror, backend, ray_address)
        return
    if benchmark is None:
        raise HarnessError("run: name a benchmark (or --resume RUN_ID)")
    if checkpoint is not None and not eval_only:
        raise HarnessError("--checkpoint needs --eval-only (a trained run starts from the spec's model)")
    if checkpoint is not None and not (checkpoint / "config.json").is_file():
        raise HarnessError(f"--checkpoint {checkpoint}: not a checkpoint folder (no config.json)")
    from harness.engines import load_checked_spec
    from harness.rollout.loading import spec_path

    spec = load_checked_spec(spec_path(benchmark), profile)
    if not eval_only and not spec.trains:
        console.print(f"{benchmark}/{spec.profile} has no training: evaluating only (as --eval-only)")
        eval_only = True
    template = RunOptions(
        benchmark=benchmark,
        profile=profile,
        data_mirror=data_mirror,
        skip_baseline=skip_baseline,
        backend=_choose_backend(backend),
        ray_address=ray_address,
        eval_only=eval_only,
        checkpoint=checkpoint.resolve() if checkpoint else None,
        limit=limit,
        trials=trials,
    )
    rows = run_seeds(template, seed_list(spec.seeds, seed, seeds), ConsoleReporter(console))
    if len(rows) > 1:
        for line in pooled_lines(rows):
            console.print(line, markup=False)


def _resume(
    run_id: str,
    benchmark: str | None,
    clashing: list[str],
    data_mirror: Path | None,
    backend: str,
    ray_address: str | None,
) -> None:
    """``harness run --resume RUN_ID``: the run's own benchmark, profile, seed, options and phases."""
    from harness.run.reporter import ConsoleReporter
    from harness.run.resume import saved_options
    from harness.run.runner import Runner

    if clashing:
        raise HarnessError(f"--resume takes the run's own settings; drop {', '.join(clashing)}")
    saved = saved_options(run_id)
    if benchmark is not None and benchmark != saved.benchmark:
        raise HarnessError(f"--resume {run_id}: the run is of benchmark {saved.benchmark!r}, not {benchmark!r}")
    where = {"data_mirror": data_mirror, "backend": _choose_backend(backend), "ray_address": ray_address}
    opts = saved.model_copy(update={**where, "resume": run_id})
    Runner(opts, ConsoleReporter(console)).run()


@app.command()
def reproduce(
    run_id: Annotated[str, typer.Argument(help="The recorded run to reproduce.")],
    benchmark: Annotated[str | None, typer.Option("--benchmark", "-b", help="The run's benchmark.")] = None,
    allow_package_drift: Annotated[
        bool,
        typer.Option("--allow-package-drift", help="Run even if installed packages differ (recorded in the note)."),
    ] = False,
    data_mirror: MirrorOpt = None,
) -> None:
    """Re-run a recorded run in a clean worktree of its commit (same profile and seed) and say if it agrees.

    Appends the new row with the note "reproduces RUN_ID". Exit 0 when it agrees, 1 when it does not.
    """
    from harness.run.reproduce import ReproduceOptions, Reproduction

    if data_mirror is not None and not data_mirror.is_dir():
        raise HarnessError(f"--data-mirror {data_mirror}: not a directory")
    options = ReproduceOptions(run_id, benchmark, allow_package_drift, data_mirror)
    if not Reproduction(options, console).run().agrees:
        raise typer.Exit(1)


def _choose_backend(requested: str) -> str:
    from harness.backends import backend_class, backend_names

    names = backend_names()
    if requested != "auto":
        if requested not in names:
            raise HarnessError(f"--backend {requested!r}: unknown (backends: auto, {', '.join(names)})")
        return requested
    if "docker" in names:
        ok, reason = backend_class("docker").available()
        if ok:
            console.print("backend: docker (engine and images available)")
            return "docker"
        console.print(f"backend: local ({reason})")
        return "local"
    console.print("backend: local")
    return "local"


def _register_commands() -> None:
    from harness.results.cli import register as register_results
    from harness.run.cli import register as register_power

    register_results(app)  # results, compare, report
    register_power(app)


_register_commands()


@contextlib.contextmanager
def _stacks_on_sigusr1() -> Iterator[None]:
    """`kill -USR1 <pid>` prints every thread's stack to stderr: where a run that seems stuck is waiting. (Not where
    stderr is no file, e.g. the CLI called in-process with its output captured.)"""
    registered = False
    with contextlib.suppress(io.UnsupportedOperation, ValueError, AttributeError, RuntimeError):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr.fileno(), all_threads=True, chain=False)
        registered = True
    try:
        yield
    finally:
        if registered:
            faulthandler.unregister(signal.SIGUSR1)


def main() -> None:
    with interrupts.installed(), _stacks_on_sigusr1():
        _main()


def _main() -> None:
    try:
        rv = app(standalone_mode=False)
        if isinstance(rv, int) and rv:  # typer returns 130 for Ctrl-C when not in standalone mode
            sys.exit(rv)
    except HarnessError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", None)
        sys.exit(code if code is not None else getattr(exc, "code", 0))
    except Exception as exc:
        code = _command_line_error(exc)
        if code is None:
            raise
        sys.exit(code)


def _command_line_error(exc: Exception) -> int | None:
    """Bad arguments (Typer's own copy of Click, or Click): one line and exit 2; None for anything else."""
    import importlib

    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if isinstance(exc, getattr(mod, "NoArgsIsHelpError", ())):
            exc.show()  # type: ignore[attr-defined]  # `harness` alone: the help text
            return 2
        if isinstance(exc, getattr(mod, "ClickException", ())):
            message = " ".join(exc.format_message().split())
            err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
            return 2
        if isinstance(exc, getattr(mod, "Abort", ())):
            return 130
    return None


if __name__ == "__main__":
    main()
