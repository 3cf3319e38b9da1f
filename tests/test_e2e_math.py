"""End to end through the CLI: baseline eval -> one real GRPO step -> eval of the new checkpoint -> results row."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO, copy_math_benchmark

pytestmark = pytest.mark.slow


def test_harness_run_math_smoke(mirror: Path, smoke_model: Path, tmp_path: Path) -> None:
    copy_math_benchmark(
        tmp_path / "benchmarks",
        {"evaluation": {"limit": 3, "max_tokens": 64}, "training": {"config": {"max_steps": 1}}},
    )
    env = dict(
        os.environ,
        HARNESS_BENCHMARKS=str(tmp_path / "benchmarks"),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        HARNESS_DATA_MIRROR=str(mirror),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "math", "--backend", "local"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "baseline eval: pass@1" in proc.stdout
    assert "eval after training: pass@1" in proc.stdout

    table = tmp_path / "results" / "math" / "runs.csv"
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "complete"
    assert row["engine"] == "trl-grpo"
    assert row["profile"] == "smoke"
    assert row["n_tasks"] == "3"
    assert row["model_hash_before"] and row["model_hash_after"]
    assert row["model_hash_before"] != row["model_hash_after"]
    assert row["train_steps"] == "1"
    assert row["dataset_sha256"].startswith("273f2b1c")
    assert float(row["wall_train_s"]) > 0 and float(row["wall_eval_s"]) > 0

    from harness.results.store import ResultStore

    store = ResultStore(tmp_path / "results")
    outcomes = store.outcomes("math", row["run_id"])
    assert sorted({o.phase for o in outcomes}) == ["after", "before"]
    assert len(outcomes) == 6
    manifest = store.manifest("math", row["run_id"])
    assert manifest["engine"]["name"] == "trl-grpo"
    assert manifest["train_metrics"] and manifest["train_metrics"][0]["step"] == 1
    assert "torch" in manifest["packages"]
    run_dir = tmp_path / "artifacts" / "runs" / row["run_id"]
    for name in ("rollouts-before.jsonl", "rollouts-after.jsonl", "train.log", "server-before.log", "manifest.json"):
        assert (run_dir / name).exists(), name
    first = json.loads((run_dir / "rollouts-after.jsonl").read_text().splitlines()[0])
    assert {"task_id", "messages", "reward", "latency_s", "prompt_tokens"} <= set(first)
