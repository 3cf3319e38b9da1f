"""What a run prints: progress bars and phase summaries."""

from __future__ import annotations

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


def print_summary(console: Console, label: str, s: Any) -> None:
    """One phase's pass rate with its interval and error counts (and pass^k for several trials per task)."""
    if s.pass_rate is None or s.ci is None:
        console.print(f"  {label}: no scored rollouts ({s.infra_errors} infra errors)")
        return
    console.print(
        f"  {label}: pass@1 {s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}] "
        f"({s.n_passed}/{s.n_scored}; infra errors {s.infra_errors}, agent errors {s.agent_errors})"
    )
    if len(s.pass_hat_k) > 1:
        console.print("    " + "  ".join(f"pass^{k} {v:.1%}" for k, v in s.pass_hat_k.items()))


def fmt(s: Any) -> str:
    if s.pass_rate is None or s.ci is None:
        return "n/a"
    return f"{s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}]"
