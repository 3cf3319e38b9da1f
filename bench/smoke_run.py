"""The embedded default end to end: ``make bench-math`` from a fresh clone, then warm re-runs, against the targets.

Measured in one run of this script, on this machine:

* **fresh**: ``git clone`` of this checkout's HEAD into a temporary folder, then ``make bench-math`` there: the
  three environments are created (from the machine's package cache, as for any user who installed before), the
  model is converted, the run goes baseline -> training -> evaluation;
* **warm**: ``make bench-math`` again in the same clone, ``--repeat`` times (environments and model reused).

For every run: the wall time of ``make`` and of each phase (from the run's manifest), the time from ``make`` to
the first rollout request (``HARNESS_TIMING`` marks), and the peak memory of the whole process tree under
``make``: the largest sum of PSS over one sample (:mod:`harness.run.memory`, every 0.5 s), with the processes that
held it. The run's own manifest records the same figure from inside (``resources``); both are printed.

Targets: peak <= 4 GiB; fresh <= 6 min (set-up included); warm <= 2 min; first rollout of a warm run <= 20 s.

Run: ``python bench/smoke_run.py [--repeat 2] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.run.memory import TreeSampler  # noqa: E402

GIB = 2**30
TARGETS = {"peak_gib": 4.0, "fresh_s": 360.0, "warm_s": 120.0, "first_rollout_s": 20.0}


@dataclass
class Measured:
    label: str
    wall_s: float
    returncode: int
    peak_pss: int = 0
    peak_top: list[tuple[str, int]] = field(default_factory=list)
    setup_s: float | None = None
    """make's own set-up (environments) before the harness started."""
    first_rollout_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    manifest_peak: int = 0
    status: str = ""


def run_make(clone: Path, label: str, env: dict[str, str]) -> Measured:
    timing_file = clone / ".cache" / f"timing-{label}.jsonl"
    timing_file.parent.mkdir(parents=True, exist_ok=True)
    timing_file.unlink(missing_ok=True)
    run_env = dict(env, HARNESS_TIMING=str(timing_file))
    print(f"== {label}: make bench-math", flush=True)
    t0 = time.time()
    start = time.monotonic()
    proc = subprocess.Popen(
        ["make", "-s", "bench-math", "BACKEND=local"],
        cwd=clone,
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sampler = TreeSampler(proc.pid).start()
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        tail = [*tail, line.rstrip()][-30:]
    code = proc.wait()
    sampler.stop()
    m = Measured(label, time.monotonic() - start, code)
    if sampler.peak is not None:
        m.peak_pss, m.peak_top = sampler.peak.pss, sampler.peak.top
    from harness import timing

    marks = {x["event"]: float(x["t"]) for x in reversed(timing.read(timing_file))}
    if "cli" in marks:
        m.setup_s = marks["cli"] - t0
    if "first_request" in marks:
        m.first_rollout_s = marks["first_request"] - t0
    manifests = sorted((clone / "artifacts" / "runs").glob("*/manifest.json"), key=lambda p: p.stat().st_mtime)
    if manifests:
        manifest = json.loads(manifests[-1].read_text())
        m.phases = {k: float(v) for k, v in manifest.get("phases", {}).get("wall_s", {}).items()}
        m.manifest_peak = int(manifest.get("resources", {}).get("peak_pss_bytes", 0))
        m.status = str(manifest.get("row", {}).get("status", ""))
    if code != 0:
        print("\n".join(tail), flush=True)
    print(f"   {describe(m)}", flush=True)
    return m


def describe(m: Measured) -> str:
    phases = " ".join(f"{k} {v:.0f} s" for k, v in m.phases.items())
    first = f"{m.first_rollout_s:.1f} s" if m.first_rollout_s is not None else "n/a"
    setup = f"{m.setup_s:.0f} s" if m.setup_s is not None else "n/a"
    top = ", ".join(f"{name} {pss / GIB:.2f}" for name, pss in m.peak_top[:3])
    return (
        f"make {m.wall_s:.0f} s (exit {m.returncode}, run {m.status or '?'}); before the harness {setup}; "
        f"phases: {phases}; first rollout {first}; peak {m.peak_pss / GIB:.2f} GiB ({top}); "
        f"manifest peak {m.manifest_peak / GIB:.2f} GiB"
    )


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "met" if value <= target else "missed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="warm re-runs after the fresh one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone")
    parser.add_argument("--json", type=Path, help="write the key figures here")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_") and k != "PYTHONPATH"}
    workdir = Path(tempfile.mkdtemp(prefix="smoke-run-", dir=REPO.parent))
    clone = workdir / "clone"
    try:
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout
        print(f"fresh clone of {commit.strip()[:12]} in a temporary folder", flush=True)
        runs = [run_make(clone, "fresh", env)]
        runs += [run_make(clone, f"warm-{i + 1}", env) for i in range(args.repeat)]
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    fresh, warm = runs[0], runs[1:]
    peaks = [r.peak_pss / GIB for r in runs if r.peak_pss]
    warm_walls = [r.wall_s for r in warm]
    warm_first = [r.first_rollout_s for r in warm if r.first_rollout_s is not None]
    med = statistics.median
    print("\nsmoke run (make bench-math, profile smoke, local backend):")
    if peaks:
        print(
            f"  peak memory of the process tree  min {min(peaks):.2f} / median {med(peaks):.2f} / max "
            f"{max(peaks):.2f} GiB over {len(peaks)} runs  (target <= {TARGETS['peak_gib']:.0f} GiB: "
            f"{verdict(max(peaks), TARGETS['peak_gib'])})"
        )
    fresh_verdict = verdict(fresh.wall_s, TARGETS["fresh_s"])
    print(
        f"  fresh clone make bench-math      {fresh.wall_s:.0f} s, of which set-up before the harness "
        f"{fresh.setup_s or 0:.0f} s  (target <= {TARGETS['fresh_s']:.0f} s: {fresh_verdict})"
    )
    if warm_walls:
        print(
            f"  warm re-run                      median {med(warm_walls):.0f} s (min {min(warm_walls):.0f})  "
            f"(target <= {TARGETS['warm_s']:.0f} s: {verdict(med(warm_walls), TARGETS['warm_s'])})"
        )
    if warm_first:
        print(
            f"  warm first rollout               median {med(warm_first):.1f} s  "
            f"(target <= {TARGETS['first_rollout_s']:.0f} s: {verdict(med(warm_first), TARGETS['first_rollout_s'])})"
        )
    for r in runs:
        print(f"  {r.label:8s} {describe(r)}")
    figures: dict[str, Any] = {
        "peak_gib": peaks,
        "fresh_s": fresh.wall_s,
        "fresh_setup_s": fresh.setup_s,
        "warm_s": warm_walls,
        "warm_first_rollout_s": warm_first,
        "phases": {r.label: r.phases for r in runs},
        "returncodes": [r.returncode for r in runs],
    }
    if args.json:
        args.json.write_text(json.dumps(figures))
    return 0 if all(r.returncode == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
