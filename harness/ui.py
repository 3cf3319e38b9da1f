"""What a run prints: progress bars and phase summaries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


def progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def print_summary(
    console: Console,
    label: str,
    s: Any,
    server_log: Path | None = None,
    cause_of: Callable[[Path], str | None] | None = None,
) -> None:
    """One phase's pass rate with its interval and error counts (and pass^k for several trials per task). When no
    rollout was scored, the model server's log (``server_log``) and the first error ``cause_of`` reads in it."""
    if s.pass_rate is None or s.ci is None:
        line = f"  {label}: no scored rollouts ({s.infra_errors} infra errors)"
        if server_log is not None and cause_of is not None and s.infra_errors:
            cause = cause_of(server_log)
            line += f"; the model server's log {f'says {cause}' if cause else 'names no error'}: {server_log}"
        console.print(line, markup=False, highlight=False)
        return
    console.print(
        f"  {label}: pass@1 {s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}] "
        f"({s.n_passed}/{s.n_scored}; infra errors {s.infra_errors}, agent errors {s.agent_errors})"
    )
    if len(s.pass_hat_k) > 1:
        console.print("    " + "  ".join(f"pass^{k} {v:.1%}" for k, v in s.pass_hat_k.items()))
    if getattr(s, "failures", None):
        kinds = ", ".join(f"{n} {kind}" for kind, n in s.failures.items())
        console.print(f"    failed by the benchmark itself: {kinds} (the episodes' info says why)")


def fmt(s: Any) -> str:
    if s.pass_rate is None or s.ci is None:
        return "n/a"
    return f"{s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}]"
