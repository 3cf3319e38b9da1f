"""Builders of run rows, outcomes and git repositories for the results tests (real files, real git)."""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.results.store.schema import RunRow, TaskOutcome
from harness.results.store.store import ResultStore

REPO_ROOT = Path(__file__).resolve().parents[2]
DATASET = "d" * 64
EVAL_ONLY: dict[str, Any] = {"train_steps": 0, "engine": "none", "model_hash_after": ""}
"""Row overrides of an evaluation-only run (no training): its comparisons pair tasks, not training seeds."""


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson 95% interval, written out here so worker processes need not import scipy."""
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, min(center - half, p)), min(1.0, max(center + half, p))


def outcomes_from(
    passes: Sequence[bool | Sequence[bool]], phase: str = "after", infra: Sequence[tuple[int, int]] = ()
) -> list[TaskOutcome]:
    """Outcomes for tasks ``t000``...: ``passes[i]`` is one bool (one sample) or a list (one per sample).

    ``infra`` lists (task index, sample) pairs recorded as infrastructure errors (passed=False).
    """
    out = []
    for i, item in enumerate(passes):
        samples = [item] if isinstance(item, bool) else list(item)
        for s, ok in enumerate(samples):
            is_infra = (i, s) in infra
            out.append(
                TaskOutcome(
                    phase=phase,  # type: ignore[arg-type]
                    task_id=f"t{i:03d}",
                    sample=s,
                    reward=1.0 if ok and not is_infra else 0.0,
                    passed=bool(ok) and not is_infra,
                    error_kind="infra" if is_infra else "",
                )
            )
    return out


def make_row(run_id: str, outcomes: Sequence[TaskOutcome] = (), **overrides: Any) -> RunRow:
    """A valid complete row; pass rates and CIs are computed from ``outcomes`` when given."""
    values: dict[str, Any] = {
        "run_id": run_id,
        "group_id": overrides.pop("group_id", run_id),
        "benchmark": "math",
        "profile": "smoke",
        "status": "complete",
        "started_at": "2025-01-01T00:00:00Z",
        "git_commit": "c" * 40,
        "git_dirty": False,
        "spec_hash": "s" * 16,
        "dataset_sha256": DATASET,
        "model": "tiny-model",
        "model_hash_before": "m" * 16,
        "model_hash_after": "n" * 16,
        "engine": "trl",
        "backend": "llama.cpp",
        "seed": 0,
        "eval_split": "test",
        "n_tasks": len({o.task_id for o in outcomes}),
        "samples_per_task": max((o.sample + 1 for o in outcomes), default=1),
        "pass_before": None,
        "ci_before_low": None,
        "ci_before_high": None,
        "pass_after": None,
        "ci_after_low": None,
        "ci_after_high": None,
        "infra_errors_before": 0,
        "infra_errors_after": 0,
        "train_steps": 10,
        "wall_setup_s": 1.5,
        "wall_baseline_s": 2.0,
        "wall_train_s": 30.25,
        "wall_eval_s": 2.0,
        "hardware": "cpu: test",
        "packages": "pydantic=2;torch=2",
        "failed_phase": "",
        "note": "",
    }
    for phase in ("before", "after"):
        rows = [o for o in outcomes if o.phase == phase and not o.is_infra]
        if rows:
            k = sum(o.passed for o in rows)
            low, high = wilson(k, len(rows))
            values[f"pass_{phase}"] = k / len(rows)
            values[f"ci_{phase}_low"], values[f"ci_{phase}_high"] = low, high
        values[f"infra_errors_{phase}"] = sum(o.is_infra for o in outcomes if o.phase == phase)
    values.update(overrides)
    return RunRow(**values)


def record(store: ResultStore, run_id: str, passes: Sequence[bool | Sequence[bool]], **overrides: Any) -> RunRow:
    """Append a run whose after-phase outcomes are ``passes``; returns its row."""
    outcomes = outcomes_from(passes)
    row = make_row(run_id, outcomes, **overrides)
    store.append_run(row, outcomes)
    return row


def accept_file(path: Path) -> None:
    """List ``path`` (an outcomes or manifest file) in its benchmark's ``files.sha256`` with its current bytes.

    Simulates a file that matches its checksum but is damaged (written so by a faulty tool), to reach the checks
    behind the checksum.
    """
    from harness.results.store.checksums import FileSums

    folder = path.parent.parent
    sums_file = folder / "files.sha256"
    sums = FileSums.decode(sums_file.read_bytes(), str(sums_file))
    relative = path.relative_to(folder).as_posix()
    sums_file.write_bytes(sums.with_files({relative: path.read_bytes()}).encode())


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo``; return stdout."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def init_repo(path: Path) -> Path:
    """A fresh git repository with a local identity and one code commit."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Results Test")
    git(path, "config", "user.email", "results@example.invalid")
    git(path, "config", "commit.gpgsign", "false")
    (path / "code.py").write_text("VERSION = 0\n")
    commit_all(path, "code v0")
    return path


def commit_all(repo: Path, message: str) -> str:
    """Stage everything and commit; return the new sha."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def child_env() -> dict[str, str]:
    """Environment for a child Python process that imports the harness from this checkout."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT)}
