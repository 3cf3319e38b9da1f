"""Shows a run's events on the terminal, one or two lines each (the runner's progress bars are drawn by the runner)."""

from __future__ import annotations

from typing import Protocol

from rich.console import Console

from harness import ui
from harness.run.events import (
    DataReady,
    EvaluationDone,
    ManifestUnwritable,
    PowerStated,
    RowRecorded,
    RunEvent,
    RunStarted,
    SignalForecast,
    TrainingDone,
    TrainingReused,
)
from harness.serving.server import first_error


class Reporter(Protocol):
    console: Console
    """Where the runner draws its progress bars."""

    def __call__(self, event: RunEvent) -> None: ...


class ConsoleReporter:
    """The harness's terminal output of a run."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()

    def __call__(self, event: RunEvent) -> None:
        print_ = self.console.print
        match event:
            case RunStarted():
                print_(
                    f"[bold]run[/] {event.run_id}  benchmark={event.benchmark} profile={event.profile} "
                    f"engine={event.engine} seed={event.seed} backend={event.backend}"
                )
                print_(f"  artifacts: {event.run_dir}")
                if event.resumed_from:
                    print_(f"  resuming {event.resumed_from}: finished phases {', '.join(event.done)}")
            case DataReady():
                print_(
                    f"  data: {event.dataset} {event.split}={event.tasks} tasks "
                    f"(sha256 {event.sha256[:12]}, from {event.origin})"
                )
                print_(f"  model: {event.model} {event.model_hash[:12]} at {event.model_path}")
            case PowerStated():
                print_(f"  power: {event.line}" + (f"; {event.unread}" if event.unread else ""), highlight=False)
            case SignalForecast():
                print_(f"  training signal: {event.line}", highlight=False)
            case EvaluationDone(reused=True):
                ui.print_summary(self.console, f"{event.label} (reused, finished by an earlier attempt)", event.summary)
            case EvaluationDone():
                ui.print_summary(self.console, event.label, event.summary, event.server_log, cause_of=first_error)
            case TrainingReused():
                print_(f"  training: reused (finished by an earlier attempt), checkpoint {event.checkpoint}")
            case TrainingDone():
                print_(f"  trained {event.steps} steps in {event.wall_s:.0f} s; checkpoint {event.model_hash[:12]}")
            case ManifestUnwritable():
                print_(f"  warning: cannot write {event.path}: {event.reason}")
            case RowRecorded():
                self._recorded(event)

    def _recorded(self, event: RowRecorded) -> None:
        print_, row = self.console.print, event.row
        print_(f"[bold]{row.status}[/] {row.run_id}: row appended to {event.results_file}")
        if event.eval_only and event.evaluated:
            evaluated = row.model_hash_after or row.model_hash_before
            print_(f"[bold]pass@1[/] {ui.fmt(event.after)}  (evaluation only; model {evaluated[:12]})")
        elif event.evaluated:
            print_(
                f"[bold]pass@1[/] before {ui.fmt(event.before)}  ->  after {ui.fmt(event.after)}  "
                f"(model {row.model_hash_before[:12]} -> {row.model_hash_after[:12] or 'not trained'})"
            )
        if event.no_signal:  # a finding, not a failure: the row is recorded, and its note says it too
            print_(
                f"[bold yellow]{event.no_signal}[/]: every group's samples got the same reward, so GRPO updated nothing"
            )
        if event.shows:
            print_(f"[dim]{event.profile}:[/] {' '.join(event.shows.split())}")
