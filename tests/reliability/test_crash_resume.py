"""Crash, resume, concurrency, secrets and a full or read-only results folder, on one real run's life.

One module-scoped story on a test-local copy of the math benchmark (2 evaluation tasks, 2 GRPO steps with a
resumable checkpoint after the first), every process real (vLLM server, TRL trainer, MCP calculator):

1. run R (baseline -> train) and, at the same time, run C of the same benchmark (profile ``tiny``) into the same
   results table and artifacts folder;
2. SIGKILL R's trainer right after it saved its step-1 checkpoint: R is recorded ``failed`` in phase ``train``;
3. ``--resume R`` with the results folder full, then read-only: one line, exit 2, table byte-identical;
4. ``--resume R`` (R2): baseline reused, training continues from step 1; SIGTERM once the first evaluation rollout
   is written -> ``incomplete``, every child gone (timed);
5. ``--resume R2`` (R3): SIGINT while the new model server starts -> ``incomplete``, children gone (timed);
6. ``--resume R3`` (R4): finishes, redoing only the evaluation rollouts not yet written -> ``complete``.

Canary secrets sit in the environment of every run; no output may contain them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.results.store.store import ResultStore
from support_reliability import (
    FIGURES,
    HarnessProcess,
    grep_files,
    interrupt_and_time,
    run_env,
    start_harness,
    wait_for,
)

pytestmark = pytest.mark.slow

CANARY = f"canary-{uuid.uuid4().hex}"
SECRETS = {
    "OPENAI_API_KEY": f"sk-{CANARY}",
    "HF_TOKEN": f"hf_{CANARY}",
    "HARNESS_TEST_API_KEY": f"{CANARY}-key",
    "HARNESS_REGISTRY_TOKEN": f"{CANARY}-token",
    "WANDB_API_KEY": f"{CANARY}-wandb",
}
N_TASKS = 3  # R2 is stopped after its first evaluation rollout: the other two (about 0.7 s each) leave time for it
STORY = {
    "evaluation": {"limit": N_TASKS, "max_tokens": 24, "concurrency": 1},
    "training": {
        "config": {
            "max_steps": 2,
            "save_steps": 1,
            "prompts_per_step": 1,
            "num_generations": 2,
            "max_completion_length": 24,
        }
    },
}


@dataclass
class Story:
    root: Path
    env: dict[str, str]
    runs: dict[str, str] = field(default_factory=dict)
    """label (R, C, R2, R3, R4) -> run id"""
    codes: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    cleanup_s: dict[str, list[float]] = field(default_factory=dict)
    """what -> [seconds until the children were gone, seconds until the harness had exited]"""
    snapshots: dict[str, Any] = field(default_factory=dict)
    disk: dict[str, tuple[int, str, bool]] = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.root / "artifacts" / "runs" / self.runs["R"]

    def rows(self) -> dict[str, Any]:
        return {r.run_id: r for r in ResultStore(self.root / "results").runs("math")}

    def row(self, label: str) -> Any:
        rows = self.rows()
        assert self.runs[label] in rows, f"{label} has no row; its output:\n{self.outputs.get(label, '')[-15000:]}"
        return rows[self.runs[label]]


def _add_tiny_profile(root: Path) -> None:
    path = root / "benchmarks" / "math" / "spec.yaml"
    raw = yaml.safe_load(path.read_text())
    tiny = json.loads(json.dumps(raw["profiles"]["smoke"]))
    tiny["evaluation"] |= {"limit": 1}
    tiny["training"]["config"] |= {"max_steps": 1, "save_steps": 0}
    raw["profiles"]["tiny"] = tiny
    path.write_text(yaml.safe_dump(raw, sort_keys=False))


def _run_id(hp: HarnessProcess) -> str:
    return wait_for(lambda: next((ln.split()[1] for ln in hp.output if ln.startswith("run ")), None), 600, "run id")


def _finish(story: Story, label: str, hp: HarnessProcess, timeout: float = 1500) -> None:
    try:
        story.codes[label] = hp.wait(timeout)
    finally:
        _keep_output(story, label, hp)


def _keep_output(story: Story, label: str, hp: HarnessProcess) -> None:
    """The process's whole output, in the story and in a file beside it (kept when a test fails)."""
    story.outputs[label] = hp.text
    (story.root / f"output-{label}.txt").write_text(hp.text)
    hp.kill()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _results_on_tmpfs(story: Story, mount: Path, fill: bool) -> bool:
    """A copy of the results folder on a small tmpfs, filled up (disk full) or remounted read-only."""
    mount.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        return False
    shutil.copytree(story.root / "results", mount / "results")
    if fill:
        with (mount / "filler").open("wb") as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    return True


def _try_resume_on(story: Story, label: str, mount: Path, fill: bool) -> None:
    if os.geteuid() != 0 or not _results_on_tmpfs(story, mount, fill):
        return
    try:
        table = (mount / "results" / "math" / "runs.csv").read_bytes()
        env = dict(story.env, HARNESS_RESULTS=str(mount / "results"))
        hp = start_harness(["run", "--resume", story.runs["R"], "--backend", "local"], env)
        code = hp.wait(120)
        hp.kill()
        unchanged = (mount / "results" / "math" / "runs.csv").read_bytes() == table
        story.disk[label] = (code, hp.text, unchanged)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory, smoke_model: Path) -> Iterator[Story]:
    root = tmp_path_factory.mktemp("story")
    env = run_env(root, STORY, **SECRETS)
    _add_tiny_profile(root)
    story = Story(root, env)
    started = time.monotonic()

    # 1-2. R and C at once; SIGKILL R's trainer after its step-1 checkpoint
    r = start_harness(["run", "math", "--backend", "local"], env)
    c = start_harness(["run", "math", "--profile", "tiny", "--skip-baseline", "--backend", "local"], env)
    story.runs["R"], story.runs["C"] = _run_id(r), _run_id(c)
    checkpoint = story.run_dir / "train" / "trainer" / "checkpoint-1" / "trainer_state.json"
    wait_for(checkpoint.exists, 1500, "R's step-1 checkpoint", 0.5)
    assert r.tree is not None
    workers = wait_for(lambda: r.tree.having("harness.engines.trl.worker"), 60, "R's trainer")
    story.snapshots["killed_pids"] = list(workers)
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    FIGURES.fault("SIGKILL trainer")
    _finish(story, "R", r)
    _finish(story, "C", c)
    story.snapshots["after_R"] = {
        "before": _lines(story.run_dir / "rollouts-before.jsonl"),
        "server_log": (story.run_dir / "server-before.log").stat().st_size,
        "state": json.loads((story.run_dir / "run-state.json").read_text()),
        "table": (root / "results" / "math" / "runs.csv").read_bytes(),
    }

    # 3. a full, then a read-only results folder refuse the resume before it starts
    _try_resume_on(story, "full", root / "full", fill=True)
    _try_resume_on(story, "read-only", root / "readonly", fill=False)
    assert (root / "results" / "math" / "runs.csv").read_bytes() == story.snapshots["after_R"]["table"]

    # 4. R2: resume; SIGTERM once the first evaluation rollout is written
    r2 = start_harness(["run", "--resume", story.runs["R"], "--backend", "local"], env)
    try:
        story.runs["R2"] = _run_id(r2)
        after = story.run_dir / "rollouts-after.jsonl"
        wait_for(lambda: len(_lines(after)) >= 1, 1500, "R2's first evaluation rollout", 0.05)
        story.codes["R2"], *story.cleanup_s["SIGTERM during eval (resumed run)"] = interrupt_and_time(
            r2, signal.SIGTERM
        )
        FIGURES.fault("SIGTERM eval")
    finally:
        _keep_output(story, "R2", r2)
    story.snapshots["after_R2"] = {"after": _lines(story.run_dir / "rollouts-after.jsonl")}

    # 5. R3: SIGINT while its model server starts
    r3 = start_harness(["run", "--resume", story.runs["R2"], "--backend", "local"], env)
    try:
        story.runs["R3"] = _run_id(r3)
        assert r3.tree is not None
        wait_for(lambda: r3.tree.having("vllm.entrypoints"), 300, "R3's model server", 0.2)
        time.sleep(3)
        story.codes["R3"], *story.cleanup_s["SIGINT during eval (server starting)"] = interrupt_and_time(
            r3, signal.SIGINT
        )
        FIGURES.fault("SIGINT eval")
    finally:
        _keep_output(story, "R3", r3)

    # 6. R4: resume to the end
    r4 = start_harness(["run", "--resume", story.runs["R3"], "--backend", "local"], env)
    story.runs["R4"] = _run_id(r4)
    _finish(story, "R4", r4)
    FIGURES.add("seconds in the crash/resume story", round(time.monotonic() - started))
    yield story
    for p in (story.run_dir / "train" / "trainer").glob("checkpoint-*"):  # large; nothing reads them any more
        shutil.rmtree(p, ignore_errors=True)


# --- 2. the crash -------------------------------------------------------------------------------------------------


def test_killed_trainer_is_a_failed_run_in_phase_train(story: Story) -> None:
    assert story.codes["R"] == 1, story.outputs["R"][-3000:]  # a failure, not a user error (2) or an interrupt
    row = story.row("R")
    assert row.status == "failed" and row.failed_phase == "train", row
    assert "killed by SIGKILL" in row.note and "out-of-memory" in row.note, row.note  # the cause, named
    assert row.pass_before is not None and row.infra_errors_before == 0  # the finished baseline is in the row
    for name in ("train.log", "server-before.log", "rollouts-before.jsonl", "manifest-" + story.runs["R"] + ".json"):
        assert (story.run_dir / name).exists(), name
    assert len(story.snapshots["after_R"]["before"]) == N_TASKS
    assert story.snapshots["after_R"]["state"]["done"] == ["setup", "baseline"]
    assert "HARNESS_PROGRESS" in (story.run_dir / "train.log").read_text()  # the log up to the kill is kept


def test_two_runs_at_once_keep_their_own_artifacts_and_rows(story: Story) -> None:
    assert story.codes["C"] == 0, story.outputs["C"][-3000:]
    rows = story.rows()
    c = rows[story.runs["C"]]
    assert c.status == "complete" and c.profile == "tiny" and c.train_steps == 1
    c_dir = story.root / "artifacts" / "runs" / story.runs["C"]
    assert c_dir != story.run_dir
    assert json.loads((c_dir / "manifest.json").read_text())["run_id"] == story.runs["C"]
    assert not (c_dir / "rollouts-before.jsonl").exists()  # C skipped its baseline; R's is in R's folder only
    assert len(_lines(c_dir / "rollouts-after.jsonl")) == 1
    store = ResultStore(story.root / "results")
    assert {o.phase for o in store.outcomes("math", story.runs["C"])} == {"after"}
    assert {o.phase for o in store.outcomes("math", story.runs["R"])} == {"before"}


# --- 3. full and read-only results folder ------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["full", "read-only"])
def test_full_or_read_only_results_folder_refuses_in_one_line(story: Story, label: str) -> None:
    if label not in story.disk:
        pytest.skip("needs root to mount a small tmpfs")
    code, output, unchanged = story.disk[label]
    FIGURES.fault(f"results folder {label}")
    assert code == 2, output
    errors = [ln for ln in output.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "results cannot be recorded" in errors[0], output
    assert ("disk full" if label == "full" else "read-only") in errors[0]
    assert "Traceback" not in output
    assert unchanged


# --- 4-6. resume ------------------------------------------------------------------------------------------------


def test_resume_reuses_the_baseline_and_continues_training_from_the_checkpoint(story: Story) -> None:
    out = story.outputs["R2"]
    assert f"resuming {story.runs['R']}" in out
    assert "baseline eval (reused" in out
    # nothing of the baseline was redone: no new server start, no new rollout
    assert (story.run_dir / "server-before.log").stat().st_size == story.snapshots["after_R"]["server_log"]
    assert _lines(story.run_dir / "rollouts-before.jsonl") == story.snapshots["after_R"]["before"]
    log = (story.run_dir / "train.log").read_text()
    assert "resuming from" in log and "checkpoint-1" in log
    steps = [json.loads(ln.split(" ", 1)[1])["step"] for ln in log.splitlines() if ln.startswith("HARNESS_PROGRESS")]
    assert steps == [1, 2], steps  # step 1 before the kill, step 2 after the resume; step 1 not redone
    manifest = ResultStore(story.root / "results").manifest("math", story.runs["R2"])
    assert manifest.engine.resumed_from_step == 1 and manifest.engine.steps == 2


def test_interrupted_attempts_are_incomplete_and_leave_no_process(story: Story) -> None:
    for label in ("R2", "R3"):
        assert story.codes[label] == 130, story.outputs[label][-3000:]
        row = story.row(label)
        assert row.status == "incomplete" and row.failed_phase == "eval", row
        assert row.note.startswith(f"resumed {story.runs['R' if label == 'R2' else 'R2']}")
    for what, (children_s, exit_s) in story.cleanup_s.items():
        FIGURES.cleanup(what, children_s, exit_s)
        assert children_s <= 10 and exit_s <= 120, (what, children_s, exit_s)


def test_resumed_run_completes_redoing_only_unfinished_rollouts(story: Story) -> None:
    rows = story.rows()
    row = rows.get(story.runs["R4"])
    FIGURES.add("runs recovered", int(story.codes["R4"] == 0 and row is not None and row.status == "complete"))
    assert story.codes["R4"] == 0, story.outputs["R4"][-3000:]
    assert row is not None
    assert row.status == "complete" and row.note == f"resumed {story.runs['R3']}"
    assert row.train_steps == 2 and row.n_tasks == N_TASKS
    assert row.pass_before == story.row("R").pass_before
    assert row.model_hash_after and row.model_hash_after != row.model_hash_before
    assert "training: reused" in story.outputs["R4"]
    done_before = story.snapshots["after_R2"]["after"]
    final = _lines(story.run_dir / "rollouts-after.jsonl")
    redone = len(final) - len(done_before)
    FIGURES.add("evaluation rollouts reused on resume", len(done_before))
    assert final[: len(done_before)] == done_before  # finished records kept byte for byte
    assert redone == N_TASKS - len(done_before), (len(done_before), len(final))  # only the missing ones ran
    manifest = ResultStore(story.root / "results").manifest("math", story.runs["R4"])
    assert manifest.resume.attempts == [story.runs[k] for k in ("R", "R2", "R3", "R4")]
    assert {o.phase for o in ResultStore(story.root / "results").outcomes("math", story.runs["R4"])} == {
        "before",
        "after",
    }


def test_no_row_lost(story: Story) -> None:
    rows = story.rows()
    expected = {story.runs[k] for k in ("R", "C", "R2", "R3", "R4")}
    FIGURES.add("rows lost", len(expected - set(rows)))
    assert set(rows) == expected, set(rows) ^ expected


def test_no_secret_reaches_any_output(story: Story) -> None:
    """The canaries were in the environment of every process of the story (harness, server, trainer)."""
    hits = grep_files(story.root / "results", CANARY) + grep_files(story.root / "artifacts", CANARY)
    hits += [Path(label) for label, text in story.outputs.items() if CANARY in text]
    FIGURES.add("secrets leaked", len(hits))
    FIGURES.add("canary secrets planted", len(SECRETS))
    assert hits == []
    manifest = json.loads((story.run_dir / "manifest.json").read_text())
    assert not {k for k in manifest["environment"] if k in SECRETS}
