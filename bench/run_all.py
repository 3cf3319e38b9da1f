"""Run every benchmark script and write a Markdown summary to ``bench/results/<UTC timestamp>.md``.

Each script prints its own figures as ratios against a baseline measured in the same run and writes its key
figures as JSON (``--json``); this collects both, with the machine's core count, CPU model and load, since
absolute times are only comparable on one machine. The summary opens with one line per target.

Run: ``python bench/run_all.py [script.py ...]`` (default: all of them; ``make perf``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

SCRIPTS = [
    "tool_overhead.py",
    "compare_scale.py",
    "cpu_executor.py",
    "cpu_sharing.py",
    "cpu_precision.py",
    "eval_concurrency.py",
    "startup.py",
    "eval_throughput.py",
    "smoke_run.py",
]


HARNESS_POLICY = "short spin (harness default)"
"""cpu_sharing.py's name for the policy harness.serving.cores sets."""


@dataclass(frozen=True)
class Headline:
    """One target: what was measured against which goal."""

    figure: str
    measured: str
    target: str
    met: bool


def _tool(f: dict[str, Any]) -> Headline:
    r = float(f["ratio"])
    return Headline("tool overhead per rollout, pooled / seed (median)", f"{r:.3f}", "<= 0.100", r <= 0.1)


def _compare(f: dict[str, Any]) -> Headline:
    s = float(f["slowest_s"])
    return Headline(f"compare / load over {f['runs']} runs, slowest scenario", f"{s:.3f} s", "< 1 s", s < 1)


def _startup(f: dict[str, Any]) -> Headline:
    t = statistics.median(f["harness_to_first_request_s"])
    v = statistics.median(f["vllm_ready_s"])
    parts = [f"bare vLLM start alone {v:.1f} s"]
    if "harness_own_s" in f:
        parts.insert(0, f"harness's own part {statistics.median(f['harness_own_s']):.1f} s")
    return Headline(
        "warm make bench-math to first rollout (median)",
        f"{t:.1f} s ({'; '.join(parts)})",
        "< 20 s",
        t < 20,
    )


def _executor(f: dict[str, Any]) -> Headline:
    start, dec = float(f["start_ratio"]), float(f["decode_ratio"])
    return Headline(
        "CPU model server, model in the engine process / in a worker process (median)",
        f"start {start:.2f}, decode of 8 x {f['tokens']} tokens {dec:.2f}",
        "< 1",
        start < 1 and dec < 1,
    )


def _sharing(f: dict[str, Any]) -> Headline:
    r = f["ratios"][HARNESS_POLICY]
    alone = max(float(r["train_alone_s"]), float(r["decode_alone_s"]))
    beside = max(float(r["train_beside_s"]), float(r["decode_beside_s"]))
    return Headline(
        "trainer beside the CPU model server, the harness's OpenMP wait (short spin) / OpenMP default (median)",
        f"beside: train {float(r['train_beside_s']):.2f}, decode {float(r['decode_beside_s']):.2f}; "
        f"alone: train {float(r['train_alone_s']):.2f}, decode {float(r['decode_alone_s']):.2f}",
        "< 1 beside, <= 1.10 alone",
        beside < 1 and alone <= 1.1,
    )


def _precision(f: dict[str, Any]) -> Headline:
    """The smoke profile serves in ``native`` precision (and trains in float32): the evaluation is the target."""
    e, t = float(f["eval_ratio"]), float(f["train_ratio"])
    native = f["native"]
    return Headline(
        f"smoke evaluation in bfloat16 / float32 on this CPU (native: {native}; median)",
        f"evaluation {e:.2f} (training, which stays float32: {t:.2f})",
        "< 1 where native is bfloat16",
        native != "bfloat16" or e < 1,
    )


def _concurrency(f: dict[str, Any]) -> Headline:
    """Same answers are required in float32; bfloat16's rounding depends on the batch, so there they are reported."""
    r, same, n = float(f["ratio"]), int(f["same_answers"]), int(f["tasks"])
    dtype = f.get("dtype", "float32")
    exact = dtype == "float32"
    return Headline(
        f"smoke evaluation, concurrency {f['concurrency']} / {f['against']} (median wall; served in {dtype})",
        f"{r:.2f}; same final answer in {same} of {n} tasks",
        "< 1, same answers" if exact else "< 1 (answers reported: bfloat16 rounding depends on the batch)",
        r < 1 and (same == n or not exact),
    )


def _eval(f: dict[str, Any]) -> Headline:
    o = float(f["overhead_rollouts_median"])
    measured = f"vLLM: {o:.1%} over the rollouts, {float(f['overhead_median']):.1%} with the calculator's start"
    if "stub" in f:
        stub = f["stub"]
        measured += (
            f"; fixed-latency stub ({stub['latency_s']:g} s): {float(stub['overhead_rollouts_median']):.1%}, "
            f"{float(stub['overhead_median']):.1%}"
        )
    return Headline(
        f"harness overhead vs raw replay, concurrency {f['concurrency']} (median)", measured, "<= 5%", o <= 0.05
    )


def _smoke(f: dict[str, Any]) -> list[Headline]:
    out = []
    if f["peak_gib"]:
        peaks = f["peak_gib"]
        out.append(
            Headline(
                f"smoke run peak memory, process tree (min / median / max of {len(peaks)})",
                f"{min(peaks):.2f} / {statistics.median(peaks):.2f} / {max(peaks):.2f} GiB",
                "<= 4 GiB",
                max(peaks) <= 4,
            )
        )
    fresh = float(f["fresh_s"])
    out.append(Headline("fresh clone make bench-math (set-up included)", f"{fresh:.0f} s", "<= 360 s", fresh <= 360))
    if f["warm_s"]:
        warm = statistics.median(f["warm_s"])
        out.append(Headline("warm make bench-math (median)", f"{warm:.0f} s", "<= 120 s", warm <= 120))
    if f["warm_first_rollout_s"]:
        first = statistics.median(f["warm_first_rollout_s"])
        out.append(Headline("warm make bench-math to first rollout (median)", f"{first:.1f} s", "<= 20 s", first <= 20))
    return out


def _tool_schema(f: dict[str, Any]) -> list[Headline]:
    kept, removed = f["kept"], f["removed"]
    out = [
        Headline(
            f"{f['profile']} rollouts calling `calculate`, schema titles removed vs kept",
            f"{removed['calculator_named']:.0%} vs {kept['calculator_named']:.0%} "
            f"(any parsed call {removed['parsed_tool_call']:.0%} vs {kept['parsed_tool_call']:.0%}; "
            f"call written as text {removed.get('call_as_text', 0):.0%} vs {kept.get('call_as_text', 0):.0%}, "
            f"naming `calculate` in {removed.get('names_in_text', {}).get('calculate', 0)} vs "
            f"{kept.get('names_in_text', {}).get('calculate', 0)}; "
            f"### answer {removed['hash_answer']:.0%} vs {kept['hash_answer']:.0%})",
            "more than kept",
            removed["calculator_named"] > kept["calculator_named"],
        )
    ]
    return out


HEADLINES: dict[str, Callable[[dict[str, Any]], Headline | list[Headline]]] = {
    "tool_overhead.py": _tool,
    "compare_scale.py": _compare,
    "cpu_executor.py": _executor,
    "cpu_sharing.py": _sharing,
    "cpu_precision.py": _precision,
    "eval_concurrency.py": _concurrency,
    "startup.py": _startup,
    "eval_throughput.py": _eval,
    "smoke_run.py": _smoke,
    # not in SCRIPTS (it downloads a 0.5 GB model): `python bench/run_all.py tool_schema.py`
    "tool_schema.py": _tool_schema,
}


@dataclass
class ScriptRun:
    script: str
    wall_s: float
    stdout: str
    returncode: int = 0
    stderr_tail: str = ""
    figures: dict[str, Any] | None = None


def summary_markdown(stamp: str, machine: list[str], runs: list[ScriptRun]) -> str:
    """The summary document: machine, one line per target, then each script's own output."""
    lines = [f"# Benchmarks {stamp}", "", *[f"- {m}" for m in machine], "", "| figure | measured | target | |"]
    lines.append("| --- | --- | --- | --- |")
    for run in runs:
        make = HEADLINES.get(run.script)
        if run.returncode != 0 or run.figures is None or make is None:
            lines.append(f"| {run.script} | failed (exit {run.returncode}) | | |")
            continue
        made = make(run.figures)
        for h in made if isinstance(made, list) else [made]:
            lines.append(f"| {h.figure} | {h.measured} | {h.target} | {'met' if h.met else 'missed'} |")
    lines.append("")
    for run in runs:
        body = run.stdout.strip() or "(no output)"
        if run.returncode != 0:
            body += f"\n\nexit code {run.returncode}:\n{run.stderr_tail}"
        lines += [f"## {run.script} ({run.wall_s:.0f} s)", "", "```", body, "```", ""]
    return "\n".join(lines)


def speed_line(when: str) -> str:
    """The machine's memory bandwidth and matmul rate now (``bench/machine_speed.py``): a shared VM drifts."""
    from machine_speed import describe, measure

    figures = measure()
    return f"speed at {when}: {describe(figures) if figures else 'not measured (machine_speed.py failed)'}"


def machine_lines() -> list[str]:
    from harness.run.provenance import git_state
    from harness.serving.hardware import cpu_model

    commit, dirty = git_state()
    load = os.getloadavg()
    return [
        f"machine: {os.cpu_count()} cores, {cpu_model()}",
        f"load average at start: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min)",
        speed_line("the start"),
        f"commit: {commit}{' (dirty)' if dirty else ''}",
    ]


def run_script(script: str, tmp: Path) -> ScriptRun:
    print(f"== {script}", flush=True)
    out = tmp / (script + ".json")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(HERE / script), "--json", str(out)], capture_output=True, text=True)
    run = ScriptRun(script, time.monotonic() - start, proc.stdout, proc.returncode)
    print(proc.stdout.strip(), flush=True)
    if proc.returncode != 0:
        run.stderr_tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        print(run.stderr_tail, flush=True)
    elif out.exists():
        run.figures = json.loads(out.read_text())
    return run


def main() -> int:
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    machine = machine_lines()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        runs = [run_script(s, Path(tmp)) for s in sys.argv[1:] or SCRIPTS]
    load = os.getloadavg()
    machine[2:2] = [f"load average at the end: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}"]
    machine[4:4] = [speed_line("the end")]
    path = out_dir / f"{stamp}.md"
    path.write_text(summary_markdown(stamp, machine, runs))
    print(f"summary: {path}")
    return 1 if any(r.returncode for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
