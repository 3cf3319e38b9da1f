"""What a profile can detect, before it runs: `harness power`, `harness validate`'s figure, a run's line and its
manifest's `power`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from results_factories import make_row, outcomes_from
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.results.stats.power import DEFAULT_BASE_RATE
from harness.results.store.manifest import Manifest, parse_manifest
from harness.results.store.store import ResultStore
from harness.rollout.loading import open_benchmark
from harness.run.planning import base_rate, profile_power, task_count
from harness.run.reporter import ConsoleReporter
from harness.run.runner import Runner
from harness.spec.options import RunOptions


def invoke(results: Path, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"HARNESS_RESULTS": str(results), "COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def baseline(tmp_path: Path) -> Path:
    """A results store with one math/reference-h200 run whose baseline passed 18.75 % (20 tasks x 8 samples)."""
    store = ResultStore(tmp_path / "results")
    outcomes = outcomes_from([[j < 3 for j in range(8)] if i < 10 else [False] * 8 for i in range(20)], "before")
    row = make_row("h200", outcomes, profile="reference-h200", started_at="2025-01-01T00:00:00Z")
    assert row.pass_before == pytest.approx(0.1875)
    store.append_run(row, outcomes)
    return store.root


def test_harness_power_prints_the_figures_and_what_a_gain_needs(baseline: Path) -> None:
    out = invoke(baseline, "power", "math", "--profile", "reference-h200", "--gain", "0.10")
    lines = out.splitlines()
    assert lines[0] == "math/reference-h200: 20 tasks x 8 samples, base rate 18.8% (baseline of run h200)"
    assert "one run, before -> after (paired over tasks, sign-flip test over tasks; evaluation noise only): " in out
    assert "trained runs of two sides, 5 seeds each (permutation test over seeds, smallest p 0.0079" in out
    assert "between-seed sd 5.0 pp, default: no profile run with several seeds recorded" in out
    assert "assumptions: 80% power at alpha 0.05 (two-sided), simulated with the test itself" in out
    assert "to detect +10.0 pp (80% power, alpha 0.05):" in out
    for needs in ("tasks at 8 samples per task", "samples per task at 20 tasks", "seeds a side at 20 tasks x 8"):
        assert needs in out
    default = invoke(baseline.parent / "empty", "power", "math", "--profile", "reference-h200", "--base-rate", "0.3")
    assert "base rate 30.0% (given)" in default
    untold = invoke(baseline.parent / "empty", "power", "math", "--profile", "smoke")
    assert "20 tasks x 1 sample, base rate 30.0% (default: no baseline recorded)" in untold
    far = invoke(baseline, "power", "math", "--profile", "reference-h200", "--gain", "0.9")
    assert far.splitlines()[-1] == "    out of reach: from 18.8% a gain stays below 81.2 pp"


def test_harness_power_refuses_bad_options(baseline: Path) -> None:
    result = CliRunner().invoke(app, ["power", "math", "--gain", "10"], env={"HARNESS_RESULTS": str(baseline)})
    assert result.exit_code != 0 and "--gain" in str(result.exception)


def test_validate_shows_each_profiles_detectable_gain(baseline: Path) -> None:
    out = invoke(baseline, "validate", "math", "--profile", "reference-h200")
    line, signal = out.splitlines()
    assert line.startswith("ok  ") and "profile=reference-h200" in line
    assert signal.strip().startswith("signal: ") and "of groups of 4 expected to differ in the task's reward" in signal
    assert (
        "detects before -> after +1" in line and "(20 tasks x 8 samples, base rate 18.8% (baseline of run h200)" in line
    )


def test_the_base_rate_is_the_latest_baseline(tmp_path: Path) -> None:
    outcomes = outcomes_from([True, False, False, False], "before")
    old = make_row("old", outcomes, started_at="2025-01-01T00:00:00Z")
    evaluated = outcomes_from([True, True, False, False])
    newer = make_row("eval", evaluated, started_at="2025-01-02T00:00:00Z", train_steps=0, model_hash_after="")
    of_a_checkpoint = make_row("ckpt", evaluated, started_at="2025-01-03T00:00:00Z", train_steps=0)
    assert base_rate([old], "smoke").value == 0.25
    assert base_rate([old, newer], "smoke").source == "evaluation-only run eval"
    assert base_rate([old, of_a_checkpoint], "smoke").source == "baseline of run old"  # not the base model
    assert base_rate([old], "full").value == DEFAULT_BASE_RATE


def test_a_run_prints_and_records_what_it_can_detect(baseline: Path) -> None:
    spec, bench, _ = open_benchmark("math", "reference-h200")
    assert task_count(spec, bench) == (20, "test split")
    runner = Runner.__new__(Runner)  # the set-up's power step alone: no model, no server
    console = Console(record=True, width=400)
    runner.spec, runner.emit = spec, ConsoleReporter(console)
    runner.options = RunOptions(benchmark="math", profile="reference-h200", results_root=baseline)
    record = runner._power(20)
    assert record is not None and record.tasks == 20 and record.samples == 8
    assert record.base_rate == 0.1875 and record.base_rate_source == "baseline of run h200"
    assert record.detectable_gain is not None and 0.11 < record.detectable_gain < 0.15
    assert record.seeds == 5 and record.detectable_gain_seeds is not None and "Beta" in record.assumptions
    text = console.export_text()
    assert f"power: detects before -> after {100 * record.detectable_gain:+.1f} pp (20 tasks x 8 samples" in text
    # the manifest keeps it; a manifest of format 2 (before `power`) still reads, without one
    manifest = Manifest.for_row(make_row("r")).model_copy(update={"power": record})
    again = parse_manifest(json.loads(json.dumps(manifest.to_json())), "test")
    assert again.power == record
    old = {**manifest.to_json(), "format_version": 2}
    del old["power"]
    assert parse_manifest(old, "old").power is None


def test_unknown_task_counts_are_said(tmp_path: Path) -> None:
    spec, _, _ = open_benchmark("math", "smoke")
    found = profile_power(spec, None, [], tasks_source="the test split is not fetched yet (harness prepare math)")
    assert found.line() == "detectable gain: n tasks unknown (the test split is not fetched yet (harness prepare math))"
    assert found.record() is None
