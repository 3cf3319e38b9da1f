"""Ctrl-C (SIGINT) and SIGTERM during set-up, baseline evaluation and training: the harness exits 130, every child
(model converter, model server, trainer, calculator) is gone within 10 s, and the run is recorded ``incomplete``
with the phase it was in and its logs kept. (The evaluation phase is interrupted both ways in test_crash_resume.py.)

Set-up is interrupted where a first run spends it: converting the model into an empty cache (with a warm cache,
set-up takes a few milliseconds and a signal would land in the baseline). The interrupted conversion must leave
nothing in the cache.

All runs share one results table, which must hold every row afterwards.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from harness.results.store.store import ResultStore
from support_reliability import FIGURES, harness, interrupt_and_time, run_env, wait_for

pytestmark = pytest.mark.slow

TINY = {
    "evaluation": {"limit": 2, "max_tokens": 16, "concurrency": 1},
    "training": {
        "config": {
            "max_steps": 1,
            "save_steps": 0,
            "prompts_per_step": 1,
            "num_generations": 2,
            "max_completion_length": 16,
        }
    },
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, smoke_model: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("interrupts")
    return root, run_env(root, TINY)


# (phase, signal, what must be running when the signal comes)
CASES = [
    ("setup", signal.SIGINT, "import convert_gguf"),
    ("setup", signal.SIGTERM, "import convert_gguf"),
    ("baseline", signal.SIGINT, "vllm.entrypoints"),
    ("baseline", signal.SIGTERM, "mcp_server_calculator"),  # server up, rollouts in flight
    ("train", signal.SIGINT, "harness.engines.trl.worker"),
    ("train", signal.SIGTERM, "harness.engines.trl.worker"),
]
RECORDED: list[str] = []


@pytest.mark.parametrize(
    ("phase", "signum", "trigger"), CASES, ids=[f"{p}-{signal.Signals(s).name}" for p, s, _ in CASES]
)
def test_interrupt_cleans_up_and_records_incomplete(
    shared: tuple[Path, dict[str, str]], phase: str, signum: int, trigger: str
) -> None:
    root, env = shared
    cache = root / f"cache-{phase}-{signal.Signals(signum).name}"
    if phase == "setup":
        env = {**env, "HARNESS_CACHE": str(cache)}
    args = ["run", "math", "--backend", "local", *(["--skip-baseline"] if phase == "train" else [])]
    with harness(args, env) as hp:
        assert hp.tree is not None
        run_id = wait_for(
            lambda: next((ln.split()[1] for ln in hp.output if ln.startswith("run ")), None), 600, "run id", 0.01
        )
        wait_for(lambda: hp.tree.having(trigger), 600, trigger, 0.05 if phase == "setup" else 0.2)
        if phase == "setup":  # the conversion has begun writing
            wait_for(lambda: any(cache.glob("models/.convert-*")), 120, "the conversion's folder", 0.05)
        else:
            time.sleep(2)
        seen = {cmd for cmd in hp.tree.alive().values()}
        code, seconds, exit_s = interrupt_and_time(hp, signum)
        output = hp.text
    FIGURES.fault(f"{signal.Signals(signum).name} {phase}")
    FIGURES.cleanup(f"{signal.Signals(signum).name} during {phase}", seconds, exit_s)
    assert code == 130, output[-3000:]
    assert seconds <= 10, seconds
    assert exit_s <= 120, exit_s  # recording the run: package versions, the row, the manifest
    if phase == "baseline":
        assert any("vllm.entrypoints" in c for c in seen), seen
    if trigger in ("mcp_server_calculator", "import convert_gguf"):
        assert any(trigger in c for c in seen), seen
    rows = {r.run_id: r for r in ResultStore(root / "results").runs("math")}
    row = rows[run_id]
    RECORDED.append(run_id)
    assert row.status == "incomplete" and row.failed_phase == phase and "interrupted" in row.note, row
    assert set(RECORDED) <= set(rows)  # earlier interrupted runs' rows are all still there
    run_dir = root / "artifacts" / "runs" / run_id
    kept: dict[str, Any] = {"baseline": "server-before.log", "train": "train.log"}
    if phase in kept:
        assert (run_dir / kept[phase]).exists()  # the log is kept (it may be empty when the signal came early)
    assert (run_dir / "manifest.json").exists()
    if phase == "setup":  # neither a half-written checkpoint nor the folder it was being written in
        assert not list(cache.glob("models/*")), list(cache.glob("models/*"))
