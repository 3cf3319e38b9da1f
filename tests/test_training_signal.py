"""GRPO's signal: measured each step by every engine, predicted before training, and a run without one says so.

The end-to-end test trains a real model (SmolLM2-135M, TRL's GRPOTrainer on a CPU) on a benchmark whose every reward
is 0, through ``harness run``: the run completes and is recorded, each step records 0 groups of N with a signal, and
its last lines and its row's note say "no training signal".
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.signal import expected_signal_share, group_signal, no_signal_line
from harness.engines.trl.worker import SignalMeter
from harness.engines.verl.traces import TraceLine, append_trace
from harness.engines.verl.worker import TraceGroups
from harness.paths import cache_dir, env_python
from harness.results.store.store import ResultStore
from harness.run.signal_forecast import THRESHOLD, predict_signal
from harness.spec import load_spec
from support import REPO

sys.path.insert(0, str(Path(__file__).parent / "results"))
from results_factories import make_row, outcomes_from


def test_a_group_has_a_signal_only_when_its_rewards_differ() -> None:
    found = group_signal(
        {"a": [1.0, 0.0, 0.0, 1.0], "b": [0.0, 0.0, 0.0, 0.0], "c": [0.3, 0.3, 0.3, 0.3]},
        {"a": [1.0, 0.0, 0.0, 1.0], "b": [0.0, 0.0, 0.0, 0.0], "c": [0.0, 0.0, 0.0, 0.0]},
    )
    assert (found.groups, found.signal_groups, found.task_signal_groups) == (3, 1, 1)
    # group a: mean 0.5, sd 0.5: every sample's |advantage| is 1; b and c contribute 0
    assert math.isclose(found.advantage_abs_mean, 4 / 12, rel_tol=1e-4)
    shaped = group_signal({"a": [0.1, 0.0], "b": [0.0, 0.0]}, {"a": [0.0, 0.0], "b": [0.0, 0.0]})
    assert shaped.record().signal_share == 0.5 and shaped.record().task_signal_share == 0.0  # shaping only
    assert shaped.record().flat() == {
        "groups": 2.0,
        "signal_groups": 1.0,
        "signal_share": 0.5,
        "task_signal_share": 0.0,
        "advantage_abs_mean": pytest.approx(0.5, abs=1e-4),
        "rollout_reward_std": pytest.approx(0.0433, abs=1e-4),
    }


def test_the_expected_share_is_the_formula_and_matches_simulated_groups() -> None:
    rates, n = [0.0, 1.0, 0.5, 0.1, 0.9], 4
    formula = sum(1 - p**n - (1 - p) ** n for p in rates) / len(rates)
    assert expected_signal_share(rates, n) == pytest.approx(formula)
    rng = random.Random(0)
    trials = 20_000
    differing = sum(len({rng.random() < p for _ in range(n)}) == 2 for _ in range(trials) for p in rates)
    assert differing / (trials * len(rates)) == pytest.approx(formula, abs=0.01)
    assert expected_signal_share([0.3], 1) == 0.0  # a group of one never differs


def test_the_prediction_reads_the_recorded_baseline_per_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted per-task pass rates of a recorded baseline (4 samples a task): the prediction is the formula on
    them, at the profile's group size; below the threshold it warns."""
    root = tmp_path / "results"
    monkeypatch.setenv("HARNESS_RESULTS", str(root))
    spec = load_spec(REPO / "benchmarks" / "math" / "spec.yaml", "smoke")  # trl-grpo, num_generations 4
    planted = [[True, False, False, False], [True, True, False, False], [False] * 4, [True] * 4]
    outcomes = outcomes_from(planted, phase="before")
    ResultStore(root).append_run(make_row("r-planted", outcomes, profile="smoke"), outcomes)
    rows = ResultStore(root).runs("math")
    found = predict_signal(spec, rows, root)
    assert found is not None and found.group_size == 4
    assert found.share == pytest.approx(expected_signal_share([0.25, 0.5, 0.0, 1.0], 4))
    assert "per-task pass rates of 4 tasks x 4+ samples, baseline of run r-planted" in found.line()
    hopeless = outcomes_from([[False] * 4] * 4, phase="before")
    ResultStore(root).append_run(
        make_row("r-hopeless", hopeless, profile="smoke", started_at="2025-02-01T00:00:00Z"), hopeless
    )
    found = predict_signal(spec, ResultStore(root).runs("math"), root)
    assert found is not None and found.share == 0.0 < THRESHOLD and "warning: below 10%" in found.line()
    one_sample = outcomes_from([True, False, False], phase="before")  # one sample a task: the pooled rate
    ResultStore(root).append_run(
        make_row("r-greedy", one_sample, profile="smoke", started_at="2025-03-01T00:00:00Z"), one_sample
    )
    found = predict_signal(spec, ResultStore(root).runs("math"), root)
    assert found is not None and found.share == pytest.approx(expected_signal_share([1 / 3], 4))
    assert "for every task, baseline of run r-greedy: an upper bound" in found.line()
    assert predict_signal(load_spec(REPO / "benchmarks" / "bfcl" / "spec.yaml", "simple-python"), rows) is None


def test_trl_groups_are_blocks_of_n_and_the_training_reward_is_the_sum() -> None:
    meter = SignalMeter(2, "correctness")

    def correctness(completions: list[str], **_: object) -> list[float]:
        return [1.0, 0.0, 0.0, 0.0]

    def format_reward(completions: list[str], **_: object) -> list[float]:
        return [0.0, 0.0, 0.1, 0.0]

    funcs = [meter.metered(correctness), meter.metered(format_reward)]
    assert [f.__name__ for f in funcs] == ["correctness", "format_reward"]
    assert [f(completions=["x"] * 4) for f in funcs] == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.1, 0.0]]
    found = meter.take()
    assert found is not None and (found.groups, found.signal_groups, found.task_signal_groups) == (2, 2, 1)
    assert meter.take() is None  # taken once


def test_verl_groups_of_a_step_are_its_batch_of_ids_in_trace_order(tmp_path: Path) -> None:
    """VERL writes every rollout of step k before any of step k + 1; the relay may read step k's metrics only after
    step k + 1's first rollouts are written. Step k's figures are its own batch of groups all the same."""
    trace = tmp_path / "rollout-traces.jsonl"
    groups = TraceGroups(trace, n=2, batch=2)

    def line(uid: str, reward: float, task_reward: float, validation: bool = False) -> TraceLine:
        return TraceLine(
            task_id="t", uid=uid, validation=validation, reward=reward, task_reward=task_reward,
            passed=task_reward == 1.0, error="", llm_calls=1, prompt_tokens=5, response_tokens=3, trained_tokens=3,
            tool_calls=0, messages=[],
        )  # fmt: skip

    assert groups.take(0) is None  # nothing traced yet
    step1 = [line("a", 1.0, 1.0), line("b", 0.1, 0.0), line("a", 0.0, 0.0), line("b", 0.0, 0.0)]
    validation = [line("v", 1.0, 1.0, validation=True), line("v", 0.0, 0.0, validation=True), line("", 0.0, 0.0)]
    step2_so_far = [line("c", 1.0, 1.0), line("c", 1.0, 1.0), line("d", 1.0, 1.0)]  # before step 1's metrics are read
    for traced in step1 + validation + step2_so_far:
        append_trace(trace, traced)
    found = groups.take(0)
    assert found is not None and (found.groups, found.signal_groups, found.task_signal_groups) == (2, 2, 1)
    partial = json.dumps(line("d", 0.0, 0.0).model_dump())
    with trace.open("a") as fh:
        fh.write(partial[:20])  # d's second line still being written
    found = groups.take(1)
    assert found is not None and (found.groups, found.signal_groups, found.reward_mean) == (2, 0, 1.0)
    with trace.open("a") as fh:
        fh.write(partial[20:] + "\n")
    found = groups.take(1)
    assert found is not None and (found.groups, found.signal_groups) == (2, 1)  # d: 1.0 and 0.0
    assert groups.take(2) is None and groups.order == ["a", "b", "c", "d"]
    assert TraceGroups(trace, n=1, batch=2).take(0) is None  # groups of one carry no signal


def test_the_no_signal_line() -> None:
    assert no_signal_line([{"groups": 2, "signal_groups": 0}, {"groups": 2, "signal_groups": 0}]) == (
        "no training signal: 0 of 4 groups had differing rewards"
    )
    assert no_signal_line([{"groups": 2, "signal_groups": 1}]) is None
    assert no_signal_line([{"reward_mean": 0.0}]) is None  # an engine that counted no groups says nothing


NEVER = '''"""Every answer scores 0: a benchmark without a training signal."""

from harness.benchmark import SingleTurnBenchmark, Task, register_benchmark


@register_benchmark
class Never(SingleTurnBenchmark):
    name = "never"
    prompt_field, answer_field = "question", "result"

    def score(self, text: str, task: Task) -> float:
        return 0.0
'''


@pytest.mark.slow
def test_a_run_without_training_signal_says_so_and_is_recorded(smoke_model: Path, tmp_path: Path) -> None:
    folder = tmp_path / "benchmarks" / "never"
    shutil.copytree(REPO / "benchmarks" / "arith", folder, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    (folder / "benchmark.py").write_text(NEVER)
    spec = (folder / "spec.yaml").read_text().replace("name: arith", "name: never")
    spec = spec.replace("shaping: {format_reward: 0.1, partial_credit: 0.3, length_penalty: 0.1}", "shaping: {}")
    spec = spec.replace("max_steps: 12", "max_steps: 2").replace("num_generations: 8", "num_generations: 2")
    spec = spec.replace("prompts_per_step: 2", "prompts_per_step: 1").replace(
        "max_completion_length: 12", "max_completion_length: 6"
    )
    (folder / "spec.yaml").write_text(spec + "  tiny: {evaluation: {limit: 2}}\n")
    env = dict(
        os.environ,
        HARNESS_BENCHMARKS=str(tmp_path / "benchmarks"),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        HARNESS_CACHE=str(cache_dir()),
        HARNESS_ENV_SERVE_CPU=str(env_python("serve-cpu").parent.parent),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "never", "--profile", "tiny", "--backend", "local"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=1500,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "training signal: " in out and "groups of 2 expected to differ" in out  # predicted at set-up
    assert "no training signal: 0 of 2 groups had differing rewards" in proc.stdout.strip().splitlines()[-1], out[
        -1500:
    ]
    (row,) = csv.DictReader((tmp_path / "results" / "never" / "runs.csv").open())
    assert row["status"] == "complete" and row["train_steps"] == "2"
    assert "no training signal: 0 of 2 groups had differing rewards" in row["note"]
    manifest = json.loads(next((tmp_path / "results" / "never" / "manifests").glob("*.json")).read_text())
    steps = manifest["train_metrics"]
    assert [(s["groups"], s["signal_groups"], s["signal_share"], s["task_signal_share"]) for s in steps] == [
        (1.0, 0.0, 0.0, 0.0),
        (1.0, 0.0, 0.0, 0.0),
    ]
    assert all(s["advantage_abs_mean"] == 0.0 and s["frac_reward_zero_std"] == 1.0 for s in steps)  # TRL agrees
    events = list((tmp_path / "artifacts").rglob("tensorboard/events.out.tfevents.*"))
    assert any(b"harness/signal_share" in e.read_bytes() for e in events)  # the curve beside TRL's own
    # predicted again now that a baseline is recorded: every task failed, so the run is warned about up front
    validate = subprocess.run(
        [sys.executable, "-m", "harness.cli", "validate", "never", "--profile", "tiny"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert validate.returncode == 0, validate.stderr[-2000:]
    assert "0.0% of groups of 2 expected to differ" in validate.stdout and "warning: below 10%" in validate.stdout
