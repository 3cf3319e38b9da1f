"""A trainer started early (``start_trainer(held=True)``, the runner's ``prestart``) gets ready, then waits: it trains
only once ``follow`` lets it, and it exits on its own when the run that started it is gone. Real local processes
running a small worker that waits the way the trl-grpo worker does (``wait_for_start``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.backends.base import LaunchSpec
from harness.backends.local import LocalBackend
from harness.benchmark import open_benchmark
from harness.engines.base import TrainRequest
from harness.engines.child import PROGRESS_PREFIX, START_FILE, start_trainer, wait_for_start

WORKER = f"""
import json, sys, time
from pathlib import Path
from harness.engines.child import wait_for_start
job = json.loads(Path(sys.argv[1]).read_text())
Path(job["output_dir"], "ready").write_text("")
wait_for_start(job)
print({PROGRESS_PREFIX!r} + json.dumps({{"step": 1, "started": time.time()}}), flush=True)
"""


class WorkerBackend(LocalBackend):
    """A real local launch of the small worker above, with the job file the engine wrote."""

    def launch(self, spec: LaunchSpec) -> Any:
        return super().launch(replace(spec, argv=["-c", WORKER, spec.argv[-1]]))


def test_a_held_trainer_gets_ready_and_waits_for_its_turn(tmp_path: Path) -> None:
    spec, path, _ = open_benchmark("math", "smoke")
    out = tmp_path / "out"
    out.mkdir()
    backend = WorkerBackend()
    request = TrainRequest(
        spec=spec,
        spec_path=path,
        base_model=tmp_path,
        output_dir=out,
        seed=0,
        log_path=tmp_path / "train.log",
        backend=backend,
    )
    job = out / "train-request.json"
    job.write_text(json.dumps({"output_dir": str(out)}))
    (out / START_FILE).write_text("left by an earlier attempt")
    try:
        trainer = start_trainer(request, what="test training", module="unused", job=job, mounts=(), held=True)
        assert json.loads(job.read_text())["start_when"] == str(out / START_FILE)
        assert not (out / START_FILE).exists()  # a start file from before does not let it through
        deadline = time.monotonic() + 60
        while not (out / "ready").exists():
            assert trainer.handle.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        assert trainer.handle.poll() is None  # ready, and waiting
        let_go = time.time()
        records = trainer.follow(total_steps=1)
    finally:
        backend.close()
    assert len(records) == 1 and records[0]["started"] >= let_go


def test_a_waiting_trainer_exits_when_its_run_is_gone(tmp_path: Path) -> None:
    """The run dies without letting it train (a SIGKILL leaves no clean-up): the trainer must not wait forever."""
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"start_when": str(tmp_path / START_FILE)}))
    worker = (
        "import os; parent = os.getppid(); import json, sys; from harness.engines.child import wait_for_start; "
        "open(sys.argv[2], 'w').close(); wait_for_start(json.load(open(sys.argv[1])), parent)"
    )
    ready = tmp_path / "ready"
    run = (  # the run: starts the worker, lets it get ready, then dies without clean-up
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {worker!r}, sys.argv[1], sys.argv[2]], "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid, flush=True); "
        "[time.sleep(0.05) for _ in range(1200) if not os.path.exists(sys.argv[2])]; os._exit(0)"
    )
    parent = subprocess.run([sys.executable, "-c", run, str(job), str(ready)], capture_output=True, text=True)
    assert ready.exists(), parent.stderr
    waiting = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(waiting):
        assert time.monotonic() < deadline, "the orphaned trainer is still waiting"
        time.sleep(0.1)


def test_a_trainer_started_without_a_hold_goes_straight_on(tmp_path: Path) -> None:
    start = time.monotonic()
    wait_for_start({"output_dir": str(tmp_path)})
    wait_for_start({"start_when": ""})
    assert time.monotonic() - start < 1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
