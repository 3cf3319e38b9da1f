"""End to end through the CLI: baseline eval -> one real GRPO step -> eval of the new checkpoint -> results row,
then ``harness reproduce`` of that row (a second real run, in a clean worktree of the run's commit).

The run happens in a throw-away git repository holding this checkout's harness and the shrunken benchmark, so its
row names a clean commit that has exactly the spec it ran.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.assets.data import load_split, rows_sha256
from harness.paths import cache_dir, env_python
from harness.spec import load_spec
from support import MATH_SPEC, REPO, copy_math_benchmark

pytestmark = pytest.mark.slow

# One GRPO step on one prompt's group of two short completions: the pipeline, not learning, is under test here (the
# smoke profile's own step is 8 completions of 48 tokens, four times the trainer's work, twice over with the
# reproduction).
TRAINING = {"max_steps": 1, "prompts_per_step": 1, "num_generations": 2, "max_completion_length": 24}


def _checkout(dest: Path) -> Path:
    """A git repository with this checkout's harness and the math benchmark shrunk to 3 tasks and 1 small step."""
    shutil.copytree(REPO / "harness", dest / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    copy_math_benchmark(
        dest / "benchmarks",
        {"evaluation": {"limit": 3, "max_tokens": 64}, "training": {"config": TRAINING}},
    )
    (dest / ".gitignore").write_text("__pycache__/\n")
    identity = ["-c", "user.name=e2e", "-c", "user.email=e2e@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-q", "-m", "e2e checkout"]):
        subprocess.run(["git", "-C", str(dest), *args], check=True, capture_output=True)
    return dest


def test_harness_run_math_smoke(smoke_model: Path, tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_BENCHMARKS"}
    env.update(
        PYTHONPATH=str(checkout),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        HARNESS_CACHE=str(cache_dir()),
        HARNESS_ENV_SERVE_CPU=str(env_python("serve-cpu").parent.parent),
        HARNESS_ENV_CALCULATOR=str(env_python("calculator").parent.parent),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "math", "--backend", "local"],
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "baseline eval: pass@1" in proc.stdout
    assert "eval after training: pass@1" in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]  # the default profile says what it shows, and what shows learning
    assert last.startswith("smoke: checks the pipeline") and "harness run math --profile tuned-h200" in last, last

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
    # results are keyed by benchmark version; the folder the run saw is hashed into the row
    from harness.run.provenance import folder_hash
    from harness.serving.hardware import cpu_dtype

    assert row["benchmark_version"] == "1"
    assert row["benchmark_sha256"] == folder_hash(checkout / "benchmarks" / "math")

    from harness.results.store.store import ResultStore

    store = ResultStore(tmp_path / "results")
    outcomes = store.outcomes("math", row["run_id"])
    assert sorted({o.phase for o in outcomes}) == ["after", "before"]
    assert len(outcomes) == 6
    manifest = store.manifest("math", row["run_id"])
    assert manifest.engine.name == "trl-grpo"
    test_rows, _ = load_split(load_spec(MATH_SPEC).dataset, "test")
    assert manifest.dataset.splits["test"].rows_sha256 == rows_sha256(test_rows)
    assert manifest.dataset.splits["test"].select is None and manifest.dataset.splits["train"].rows == 64
    assert manifest.train_metrics and manifest.train_metrics[0]["step"] == 1
    assert "torch" in manifest.packages
    assert (manifest.spec.version, manifest.spec.benchmark_folder_sha256) == (1, row["benchmark_sha256"])
    # the whole process tree's peak memory, and which phase and processes held it
    resources = manifest.resources
    assert resources is not None and 200 * 2**20 < resources.peak_pss_bytes <= resources.peak_rss_bytes * 1.2
    assert resources.peak_phase in ("setup", "baseline", "train", "eval") and resources.peak_top
    # trl-grpo trains without the model server: it is stopped for training, another serves the trained model
    assert manifest.serving is not None and (manifest.serving.starts, manifest.serving.weight_loads) == (2, 0)
    # the smoke profile serves in `native` precision (bfloat16 on a CPU that computes it, else float32), trains in
    # float32, and the manifest says which
    assert (manifest.serving.dtype, manifest.engine.precision) == (cpu_dtype("native"), "float32")
    run_dir = tmp_path / "artifacts" / "runs" / row["run_id"]
    for name in ("rollouts-before.jsonl", "rollouts-after.jsonl", "train.log", "server-before.log", "manifest.json"):
        assert (run_dir / name).exists(), name
    first = json.loads((run_dir / "rollouts-after.jsonl").read_text().splitlines()[0])
    assert {"task_id", "messages", "reward", "latency_s", "prompt_tokens"} <= set(first)

    # the same run again, from its row and manifest, in a clean worktree of its commit: CPU training is
    # bit-deterministic, so the trained checkpoint and every outcome must be identical
    assert row["git_dirty"] == "false"
    again = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", row["run_id"]],
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout,
        timeout=1800,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"agrees with {row['run_id']}" in again.stdout
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 2 and rows[1]["note"] == f"reproduces {row['run_id']}"
    assert rows[1]["model_hash_after"] == row["model_hash_after"] and rows[1]["git_commit"] == row["git_commit"]
    assert (
        subprocess.run(["git", "-C", str(checkout), "worktree", "list"], capture_output=True, text=True).stdout.count(
            "\n"
        )
        == 1
    )  # the reproduction's worktree is gone
