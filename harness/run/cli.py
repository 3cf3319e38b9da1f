"""The ``power`` command of the ``harness`` CLI: what a profile can detect before it runs.

Only argument parsing lives here; the work is done by :mod:`harness.run.planning` and
:mod:`harness.run.signal_forecast`, on the spec and benchmark :mod:`harness.rollout.loading` finds. User errors are
raised as :class:`~harness.errors.ResultsError` for the main CLI to print as one line (exit code 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.errors import ResultsError


def power_command(
    benchmark: Annotated[str, typer.Argument(help="Benchmark name, or a path to a spec.yaml.")],
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="Only this profile.")] = None,
    gain: Annotated[
        float | None,
        typer.Option(
            "--gain", help="A target gain (a fraction: 0.10 is +10 pp): the tasks, samples and seeds it needs."
        ),
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of the test.")] = 0.05,
    power: Annotated[float, typer.Option("--power", help="The power asked for.")] = 0.8,
    base_rate: Annotated[
        float | None,
        typer.Option(
            "--base-rate", help="Pass rate before training (default: the latest recorded baseline, else 0.3)."
        ),
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=2, help="Seeds a side for the cross-run figure.")] = 5,
    concentration: Annotated[
        float,
        typer.Option("--concentration", help="Spread of task difficulty: Beta concentration (smaller: more spread)."),
    ] = 2.0,
) -> None:
    """What a profile can detect before it runs: the smallest before -> after gain (paired over tasks) and the
    smallest gain between trained runs (seeds as units), at 80% power by default, simulated with the harness's own
    tests; with --gain, the tasks, samples per task and seeds a side that gain needs."""
    from harness.results.stats.power import PowerModel
    from harness.rollout.loading import load_benchmark, spec_path
    from harness.run.planning import profile_power, recorded_rows, task_count
    from harness.run.signal_forecast import predict_signal
    from harness.spec import load_spec, profile_names

    checks = {"--alpha": 0 < alpha < 1, "--power": 0 < power < 1, "--concentration": concentration > 0}
    checks |= {"--gain": gain is None or 0 < gain < 1, "--base-rate": base_rate is None or 0 <= base_rate <= 1}
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise ResultsError(f"{', '.join(bad)}: out of range (alpha, power, gain and base rate are fractions in (0, 1))")
    path = Path(benchmark) if benchmark.endswith((".yaml", ".yml")) else spec_path(benchmark)
    model = PowerModel(concentration=concentration)
    for name in [profile] if profile else profile_names(path):
        spec = load_spec(path, name)
        tasks, source = task_count(spec, load_benchmark(spec, path.parent))
        rows, unread = recorded_rows(spec.name)
        found = profile_power(
            spec, tasks, rows, tasks_source=source, alpha=alpha, power=power, rate=base_rate, seeds=seeds, model=model
        )
        signal = predict_signal(spec, rows)
        lines = found.lines() + ([f"  training signal: {signal.line()}"] if signal is not None else [])
        lines += found.needs(gain) if gain is not None else []
        for line in lines + ([f"  note: {unread}"] if unread else []):
            typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add ``power`` to the main ``harness`` app."""
    app.command("power")(power_command)
