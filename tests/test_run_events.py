"""The runner runs and emits events; a reporter shows them; several seeds are chosen and run outside the CLI.

A real run (arith, evaluation only, on the smoke model served by vLLM on the CPU) with a reporter that keeps what
it is told: the events come in the order of the run's phases, carry the run's own figures, and the terminal lines
are the reporter's alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.results.store.manifest import PhaseSummary
from harness.results.store.store import ResultStore
from harness.run import events
from harness.run.reporter import ConsoleReporter
from harness.run.runner import Runner
from harness.run.seeds import seed_list
from harness.spec.options import RunOptions


class Recording(ConsoleReporter):
    def __init__(self) -> None:
        super().__init__(Console(record=True, width=300))
        self.events: list[events.RunEvent] = []

    def __call__(self, event: events.RunEvent) -> None:
        self.events.append(event)
        super().__call__(event)


def test_seed_list_takes_the_given_seed_upward_or_the_specs_then_the_next_unused() -> None:
    assert seed_list([0], None, 1) == [0]
    assert seed_list([0], None, 3) == [0, 1, 2]
    assert seed_list([3, 7], None, 3) == [3, 7, 8]
    assert seed_list([3, 7], None, 1) == [3]
    assert seed_list([0], 5, 3) == [5, 6, 7]
    assert seed_list([], None, 2) == [0, 1]


def test_the_reporter_says_what_a_finished_run_recorded(tmp_path: Path) -> None:
    reporter = Recording()
    summary = PhaseSummary(pass_rate=0.5, ci=(0.2, 0.8), n_passed=2, n_scored=4)
    reporter(events.EvaluationDone("baseline eval", summary))
    reporter(events.TrainingDone(steps=4, wall_s=12.4, model_hash="ab" * 32))
    reporter(events.EvaluationDone("eval after training", PhaseSummary(infra_errors=3), server_log=tmp_path / "x"))
    text = reporter.console.export_text()
    assert "  baseline eval: pass@1 50.0% [20.0%, 80.0%] (2/4; infra errors 0, agent errors 0)" in text
    assert "  trained 4 steps in 12 s; checkpoint abababababab" in text
    assert "eval after training: no scored rollouts (3 infra errors); the model server's log" in text


@pytest.mark.slow
def test_a_run_emits_its_phases_in_order_and_returns_its_row(smoke_model: Path, isolated: Path) -> None:
    reporter = Recording()
    options = RunOptions(benchmark="arith", eval_only=True, limit=2, seed=4, backend="local")
    row = Runner(options, reporter).run()

    kinds = [type(e).__name__ for e in reporter.events]
    assert kinds == ["RunStarted", "DataReady", "PowerStated", "EvaluationDone", "RowRecorded"], kinds
    started, data, _, evaluated, recorded = reporter.events
    assert isinstance(started, events.RunStarted) and started.run_id == row.run_id and started.seed == 4
    assert isinstance(data, events.DataReady) and data.tasks == 2 and data.model_hash == row.model_hash_before
    assert isinstance(evaluated, events.EvaluationDone) and evaluated.label == "evaluation"
    assert evaluated.summary.pass_rate == row.pass_after
    assert isinstance(recorded, events.RowRecorded) and recorded.row == row
    store = ResultStore()
    assert store.runs("arith") == [row]  # the row returned is the row recorded
    # the options it used, resolved, are recorded: `harness reproduce` rebuilds the command from them
    args = store.manifest("arith", row.run_id).args
    passed = {"benchmark": "arith", "seed": 4, "skip_baseline": False, "backend": "local", "eval_only": True}
    assert args.as_passed == {**passed, "limit": 2}
    assert args.resolved == {**args.as_passed, "profile": row.profile}

    text = reporter.console.export_text()
    assert text.splitlines()[0].startswith(f"run {row.run_id}  benchmark=arith profile=")
    assert f"complete {row.run_id}: row appended to " in text
    assert text.splitlines()[-1].startswith("pass@1 ") and "(evaluation only; model " in text.splitlines()[-1]
