"""τ² end to end through the CLI, with a fault: the user simulator is killed before the final evaluation.

One real run (SmolLM2 plays both sides on CPU): baseline with the served user simulator -> one trace-grpo step on
real traced conversations -> the user-simulator server is SIGKILLed -> the final evaluation's conversations are
infra errors (not 0 rewards), the run still finishes, and nothing recorded before the fault is lost.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import yaml

from support import REPO

pytestmark = pytest.mark.slow


def _tiny_tau2(dest: Path) -> None:
    from harness.spec.parse import deep_merge

    src = REPO / "benchmarks" / "tau2"
    shutil.copytree(src, dest / "tau2", ignore=shutil.ignore_patterns("__pycache__"))
    raw = yaml.safe_load((src / "spec.yaml").read_text())
    raw["profiles"]["smoke"] = deep_merge(
        raw["profiles"]["smoke"],
        {
            "agent": {"options": {"max_steps": 4}},
            "evaluation": {"limit": 1, "samples_per_task": 2},
            "training": {"config": {"tasks_per_step": 1, "group_size": 2, "max_triplets": 2}},
        },
        top=False,
    )
    (dest / "tau2" / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))


def _kill_user_simulator(run_pid: int) -> int:
    """SIGKILL this run's user-simulator server (API process and engine: its whole process group)."""
    killed = 0
    for proc in psutil.Process(run_pid).children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "--served-model-name user-simulator-" in cmd:
            os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
            killed += 1
    return killed


def test_tau2_run_survives_a_dead_user_simulator(smoke_model: Path, tmp_path: Path) -> None:
    _tiny_tau2(tmp_path / "benchmarks")
    env = dict(
        os.environ,
        HARNESS_BENCHMARKS=str(tmp_path / "benchmarks"),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        PYTHONUNBUFFERED="1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "tau2", "--backend", "local"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=REPO,
    )
    lines: list[str] = []
    killed = threading.Event()
    children: set[int] = set()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            try:
                children.update(c.pid for c in psutil.Process(proc.pid).children(recursive=True))
            except psutil.NoSuchProcess:
                pass
            if line.strip().startswith("trained ") and not killed.is_set():
                assert _kill_user_simulator(proc.pid) >= 1
                killed.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        proc.wait(timeout=2400)
    finally:
        if proc.poll() is None:
            proc.kill()
    thread.join(timeout=10)
    out = "".join(lines)
    assert proc.returncode == 0, out[-5000:]
    assert killed.is_set(), out[-3000:]
    # the evaluation with no scored rollout says so, and where the policy server's log is (its server was fine)
    assert "no scored rollouts (2 infra errors); the model server's log names no error" in out, out[-3000:]

    rows = list(csv.DictReader((tmp_path / "results" / "tau2" / "runs.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "complete" and row["engine"] == "trace-grpo"
    # before the fault: two scored conversations; after it: both infra errors, no pass rate, no zeros
    assert row["infra_errors_before"] == "0" and row["pass_before"] != ""
    assert row["infra_errors_after"] == "2" and row["pass_after"] == ""
    assert row["train_steps"] == "1"

    run_dir = tmp_path / "artifacts" / "runs" / row["run_id"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    sim = manifest["user_simulator"]
    assert sim["source"] == "served" and sim["model"] == "SmolLM2-135M-Instruct" and len(sim["hash"]) == 64
    before = manifest["phases"]["before"]
    assert set(before["pass_hat_k"]) == {"1", "2"} and before["infra_errors"] == 0
    after = [json.loads(line) for line in (run_dir / "rollouts-after.jsonl").read_text().splitlines()]
    assert [e["error_kind"] for e in after] == ["infra", "infra"]
    assert all(e["attempts"] > 1 for e in after)  # retried before giving up

    # the training step ran on real traced calls of the assistant only
    metrics = manifest["train_metrics"]
    assert len(metrics) == 1 and metrics[0]["traced_calls"] >= 2 and metrics[0]["rollouts"] == 2
    traced = [json.loads(line) for line in (run_dir / "train" / "rollouts-step1.jsonl").read_text().splitlines()]
    assert len(traced) == 2 and all(e["error_kind"] != "infra" for e in traced)
    # the training rollouts used the baseline's server; a step that changed the weights (not every step does:
    # groups with equal rewards carry no signal) gets the trained checkpoint a server of its own, since SmolLM2's
    # tied output layer cannot be reloaded in place
    updated = row["model_hash_after"] != row["model_hash_before"]
    assert manifest["serving"]["starts"] == (2 if updated else 1) and manifest["serving"]["weight_loads"] == 0
    assert not (run_dir / "train" / "rollouts-step1.server.log").exists()

    # τ²'s own tools read the baseline, and agree with the harness's pass^k
    from tau2.data_model.simulation import Results
    from tau2.metrics.agent_metrics import compute_metrics

    results = Results.load(run_dir / "native-results-before.json")
    assert len(results.simulations) == 2
    theirs = compute_metrics(results).pass_hat_ks
    assert {str(k): v for k, v in theirs.items()} == pytest.approx(before["pass_hat_k"])
    assert (
        not (run_dir / "native-results-after.json").exists()
        or not Results.load(run_dir / "native-results-after.json").simulations
    )
    # no server is left behind
    time.sleep(2)
    alive = [p for p in children if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert children and not alive, alive
