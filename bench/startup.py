"""Warm start: ``make bench-math`` (environments, dataset and converted model cached) to its first rollout request.

Measured in the same run, interleaved so that load on a shared machine hits both sides alike:

* ``make bench-math BACKEND=local`` with ``HARNESS_TIMING`` set (results and artifacts in a temporary folder): from
  starting ``make`` to the ``first_request`` mark, the moment the first chat request of the baseline evaluation
  leaves for the model server (a local connection: it reaches the server within a millisecond). The run is then
  interrupted (it records itself as ``incomplete`` in the temporary results folder and stops its server). The
  marks in between say where the time went (``harness.timing``);
* baseline ``vllm``: the bare vLLM server for the same checkpoint with the same arguments, from its start to its
  first ``200`` on ``/v1/models`` -- the floor for any harness that serves the model with vLLM;
* baseline ``import``: ``python -c 'import harness.cli'`` and ``import harness.run.runner``.

The harness's own critical path is the part of each run that is not the model server's start (before its
launch, and from its first answer to the first request); being paired within one run, it is the figure that
load on the machine blurs least.

vLLM's own log lines about its start-up phases (weights, engine init) are quoted from the bare server's log.
Prints min / median per figure over ``--repeat`` rounds; the target is < 20 s to the first rollout.

Run: ``python bench/startup.py [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.timing import TimingMark

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# The marks of a run, in order, and what the time before each is spent on.
STAGES = (
    ("cli", "make + interpreter + CLI imports"),
    ("model_ready", "runner imports, run set-up, model checkpoint located"),
    ("server_launched", "model server process started"),
    ("setup_done", "data verified, model hashed (overlaps the server start)"),
    ("tools_ready", "evaluation client and calculator up (overlaps the server start)"),
    ("server_ready", "wait for the model server to answer"),
    ("first_request", "first chat request sent"),
)
# vLLM's start, read from its log: the first line of each process, and its own phase timings.
VLLM_MILESTONES = (
    (r"\(APIServer pid=\d+\)", "API server process: imports done, arguments parsed"),
    (r"\(APIServer pid=\d+\) .*Resolved architecture", "API server: model config resolved"),
    (r"\(EngineCore pid=\d+\)", "engine core process (spawned): imports done"),
    (r"\((?:Worker|VllmWorker-\d+) pid=\d+\)", "worker process (spawned; none when the model runs in the engine)"),
    (r"Loading weights took", "weights loaded"),
    (r"init engine \(", "KV cache allocated, model warmed up"),
    (r"Starting vLLM server on", "HTTP server up"),
)
VLLM_PHASES = (r"Loading weights took [\d.]+ seconds", r"init engine \([^)]*\) took [\d.]+ s")
_LOG_TIME = re.compile(r" (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ")


def stage_durations(marks: Sequence[TimingMark], t0: float) -> dict[str, float]:
    """Seconds from the previous mark (or ``t0``) to each known mark, plus ``total`` to the last one seen."""
    seen = {m.event: m.t for m in reversed(marks)}  # first occurrence of each event wins
    out: dict[str, float] = {}
    prev = t0
    for event, _ in STAGES:
        if event in seen:
            out[event] = seen[event] - prev
            prev = seen[event]
    if out:
        out["total"] = prev - t0
    return out


def own_critical_path(stages: dict[str, float]) -> float:
    """Seconds of a run's start that are not the model server's own start: before its launch and after it
    answered. Paired within one run, so a noisy server start does not blur it."""
    return sum(stages.get(e, 0.0) for e in ("cli", "model_ready", "server_launched", "first_request"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process groups and its children's (the model server runs in a session of its own)."""
    for child in _children(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(child), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def harness_start(tmp: Path, timeout_s: float) -> dict[str, float]:
    """One warm ``make bench-math`` to its first rollout request, then interrupt it; stage durations."""
    timing_file = tmp / "timing.jsonl"
    timing_file.unlink(missing_ok=True)
    env = dict(
        os.environ,
        HARNESS_TIMING=str(timing_file),
        HARNESS_RESULTS=str(tmp / "results"),
        HARNESS_ARTIFACTS=str(tmp / "artifacts"),
        PYTHONPATH=str(REPO),
    )
    from harness import timing

    t0 = time.time()
    make = subprocess.Popen(
        ["make", "-s", "bench-math", "BACKEND=local"],
        cwd=REPO,
        env=env,
        stdout=(tmp / "make.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    harness_pid = None
    try:
        while time.time() - t0 < timeout_s:
            marks = timing.read(timing_file)
            if marks:
                harness_pid = marks[0].pid
            if any(m.event == "first_request" for m in marks):
                return stage_durations(marks, t0)
            if make.poll() is not None:
                tail = (tmp / "make.log").read_text()[-2000:]
                for log in sorted((tmp / "artifacts").glob("runs/*/server-*.log")):  # gone with the temp folder
                    tail += f"\n{log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                raise RuntimeError(f"make bench-math exited with {make.returncode} before a rollout:\n{tail}")
            time.sleep(0.05)
        raise RuntimeError(f"no rollout request within {timeout_s:.0f} s")
    finally:
        # Interrupt the run as Ctrl-C would: it stops its model server and records itself as incomplete.
        if harness_pid is not None and _alive(harness_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(harness_pid, signal.SIGTERM)
            deadline = time.time() + 90
            while _alive(harness_pid) and time.time() < deadline:
                time.sleep(0.2)
            if _alive(harness_pid):
                _kill_tree(harness_pid)
        try:
            make.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()


def vllm_start(checkpoint: Path, tmp: Path, log_name: str) -> tuple[float, float]:
    """The bare vLLM server with the smoke profile's arguments: (seconds from its start to ready, start time)."""
    from harness.rollout.loading import open_benchmark
    from harness.serving.server import launch

    spec, _, _ = open_benchmark("math", "smoke")
    launched = time.time()
    server = launch(checkpoint, spec.model.name, spec.serving, tmp / log_name)
    try:
        server.wait_ready(spec.serving.startup_timeout_s)
        return time.monotonic() - server.launched_at, launched
    finally:
        server.stop()


def import_time(module: str, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", f"import {module}"], check=True, env=dict(os.environ, PYTHONPATH=str(REPO))
        )
        out.append(time.perf_counter() - start)
    return out


def vllm_timeline(text: str, launched: float) -> list[tuple[float, str]]:
    """(seconds after ``launched``, milestone) for each milestone found in a vLLM log (whole-second stamps)."""
    year = time.gmtime(launched).tm_year
    out = []
    lines = text.splitlines()
    for pattern, label in VLLM_MILESTONES:
        for line in lines:
            if re.search(pattern, line) and (m := _LOG_TIME.search(line)):
                mon, day, hh, mm, ss = (int(g) for g in m.groups())
                stamp = calendar.timegm((year, mon, day, hh, mm, ss, 0, 0, 0))
                out.append((stamp - launched, label))
                break
    return out


def vllm_log_phases(text: str) -> list[str]:
    return [m.group(0).strip() for pattern in VLLM_PHASES for m in re.finditer(pattern, text)]


def fmt(values: Sequence[float]) -> str:
    return f"min {min(values):5.1f} s  median {statistics.median(values):5.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from harness.assets.models import prepare_model
    from harness.rollout.loading import open_benchmark

    spec, _, _ = open_benchmark("math", "smoke")
    checkpoint = prepare_model(spec.model)  # warm: converted before, as a warm `make bench-math` finds it
    runs: list[dict[str, float]] = []
    vllm: list[float] = []
    timeline: list[tuple[float, str]] = []
    phases: list[str] = []
    imports = {m: import_time(m, args.repeat + 1) for m in ("harness.cli", "harness.run.runner")}
    with tempfile.TemporaryDirectory(prefix="startup-") as tmp_name:
        tmp = Path(tmp_name)
        for r in range(args.repeat):
            order = ["harness", "vllm"] if r % 2 == 0 else ["vllm", "harness"]
            for side in order:
                if side == "harness":
                    runs.append(harness_start(tmp, args.timeout))
                    print(f"  round {r + 1} make bench-math to first rollout: {runs[-1]['total']:.1f} s", flush=True)
                else:
                    ready_s, launched = vllm_start(checkpoint, tmp, f"vllm-{r}.log")
                    vllm.append(ready_s)
                    if r == 0:
                        text = (tmp / "vllm-0.log").read_text(errors="replace")
                        timeline, phases = vllm_timeline(text, launched), vllm_log_phases(text)
                    print(f"  round {r + 1} bare vLLM start to ready: {vllm[-1]:.1f} s", flush=True)

    totals = [r["total"] for r in runs]
    print(f"startup: warm `make bench-math` to its first rollout request, {args.repeat} rounds (min / median)")
    print(f"  harness, make to first rollout:   {fmt(totals)}  (target < 20 s)")
    print(f"  bare vLLM start to ready:         {fmt(vllm)}  (same checkpoint and arguments)")
    for module, times in imports.items():
        print(f"  python -c 'import {module}': {' ' * (17 - len(module))}{fmt(times)}")
    own = [own_critical_path(r) for r in runs]
    boot = [r["total"] - o for r, o in zip(runs, own, strict=True)]
    print(f"  model server start inside the run: {fmt(boot)}  (launch to ready, set-up running alongside)")
    print(f"  harness's own critical path:      {fmt(own)}  (make to first rollout - the server's start in that run)")
    print("  where the harness's time goes (median seconds since the previous mark):")
    for event, what in STAGES:
        values = [r[event] for r in runs if event in r]
        if values:
            print(f"    {event:16} {statistics.median(values):6.1f} s  {what}")
    print("  where the bare vLLM start goes (first round, from its log's whole-second stamps):")
    for at, label in timeline:
        print(f"    +{at:5.0f} s  {label}")
    if phases:
        print("    vLLM's own figures: " + "; ".join(phases))
    if args.json:
        figures = {
            "harness_to_first_request_s": totals,
            "harness_own_s": own,
            "vllm_ready_s": vllm,
            "imports_s": imports,
            "stages": runs,
            "vllm_log": phases,
            "vllm_timeline": timeline,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
