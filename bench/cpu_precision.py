"""The smoke run in bfloat16 against float32 on this CPU: its evaluation (served by vLLM) and its GRPO training.

The smoke profile serves in ``native`` precision (``harness/serving/hardware.py``): bfloat16 where the CPU computes it
in hardware, else float32; it trains in float32. This measures both phases in both dtypes on the machine at hand:

* evaluation: one CPU model server per dtype (the smoke profile's serving arguments otherwise), the harness's own
  evaluation of the 20 math test tasks (agent, MCP calculator, greedy) against each; a first pass per server is a
  warm-up, then the timed passes alternate (A B, B A, ...);
* training: the trl-grpo worker of the smoke profile (its GRPO steps on 8 tasks) once per precision per round, the
  order alternating; the figure is the trainer's own wall time for its steps (``train_runtime``).

Prints each side's times, the ratios (bfloat16 / float32; below 1 is faster) and how many of the 20 greedy answers
agree (different arithmetic changes some logits' last bits, and then some answers).

Run: ``python bench/cpu_precision.py [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from eval_concurrency import answers, one_pass  # noqa: E402

DTYPES = ("float32", "bfloat16")


def _alternating(repeat: int) -> list[list[str]]:
    return [list(DTYPES) if r % 2 == 0 else list(reversed(DTYPES)) for r in range(repeat)]


def evaluation(spec: Any, bench: Any, tasks: list[Any], checkpoint: Path, tmp: Path, repeat: int) -> dict[str, Any]:
    from harness.serving.server import launch

    servers = {
        d: launch(checkpoint, spec.model.name, spec.serving.model_copy(update={"dtype": d}), tmp / f"server-{d}.log")
        for d in DTYPES
    }
    walls: dict[str, list[float]] = {d: [] for d in DTYPES}
    texts: dict[str, dict[str, str]] = {}
    try:
        for d, server in servers.items():  # warm-up, not timed
            server.wait_ready(spec.serving.startup_timeout_s)
            one_pass(bench, tasks, server.endpoint.base_url, server.endpoint.model, spec, 20, tmp / f"warm-{d}.jsonl")
        for r, order in enumerate(_alternating(repeat)):
            for d in order:
                s = servers[d]
                took, episodes = one_pass(
                    bench, tasks, s.endpoint.base_url, s.endpoint.model, spec, 20, tmp / f"r{r}-{d}.jsonl"
                )
                walls[d].append(took)
                texts.setdefault(d, answers(episodes))
                print(f"  round {r + 1} evaluation {d}: {len(tasks)} tasks in {took:.1f} s", flush=True)
    finally:
        for server in servers.values():
            server.stop()
    same = sum(texts["bfloat16"][t] == texts["float32"].get(t) for t in texts["bfloat16"])
    return {"walls_s": walls, "same_answers": same, "tasks": len(tasks)}


def _spec_with(precision: str, tmp: Path) -> Path:
    """A copy of the math benchmark whose smoke profile trains in ``precision``."""
    import yaml

    folder = tmp / f"math-{precision}" / "math"  # the folder names the benchmark
    shutil.copytree(REPO / "benchmarks" / "math", folder)
    path = folder / "spec.yaml"
    data = yaml.safe_load(path.read_text())
    data["profiles"]["smoke"]["training"]["config"]["precision"] = precision
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def training(checkpoint: Path, tmp: Path, repeat: int, steps: int) -> dict[str, list[float]]:
    from harness.serving.cores import share_cores

    runtimes: dict[str, list[float]] = {d: [] for d in DTYPES}
    for r, order in enumerate(_alternating(repeat)):
        for d in order:
            out = tmp / f"train-{d}-{r}"
            job = tmp / f"job-{d}-{r}.json"
            job.write_text(
                json.dumps(
                    {
                        "benchmark": "math",
                        "profile": "smoke",
                        "spec_path": str(_spec_with(d, out)),
                        "base_model": str(checkpoint),
                        "output_dir": str(out),
                        "seed": 0,
                        "data_mirror": os.environ.get("HARNESS_DATA_MIRROR", ""),
                        "resume_from_checkpoint": "",
                    }
                )
            )
            env = share_cores(dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
            env["TRL_EXPERIMENTAL_SILENCE"] = "1"
            done = subprocess.run(
                [str(REPO / ".venv" / "bin" / "python"), "-m", "harness.engines.trl.worker", str(job)],
                env=env,
                capture_output=True,
                text=True,
                cwd=REPO,
            )
            found = re.search(r"'train_runtime': '([0-9.]+)'", done.stdout + done.stderr)
            if done.returncode != 0 or not found or f"precision: {d}" not in done.stdout:
                tail = (done.stdout + done.stderr)[-2000:]
                raise SystemExit(f"the {d} training failed (exit {done.returncode}):\n{tail}")
            runtimes[d].append(float(found.group(1)))
            print(f"  round {r + 1} training {d}: {steps} GRPO step(s) in {runtimes[d][-1]:.1f} s", flush=True)
    return runtimes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from harness.assets.data import load_split
    from harness.assets.models import prepare_model
    from harness.rollout.loading import open_benchmark
    from harness.serving.hardware import cpu_dtype

    spec, bench, _ = open_benchmark("math", "smoke")
    rows, _ = load_split(spec.dataset, spec.evaluation.split)
    tasks = bench.tasks(rows)
    checkpoint = prepare_model(spec.model)
    native = cpu_dtype("native")
    steps = int(spec.training.config["max_steps"])
    with tempfile.TemporaryDirectory(prefix="cpu-precision-") as tmp_name:
        tmp = Path(tmp_name)
        ev = evaluation(spec, bench, tasks, checkpoint, tmp, args.repeat)
        tr = training(checkpoint, tmp, args.repeat, steps)
    med_e = {d: statistics.median(ev["walls_s"][d]) for d in DTYPES}
    med_t = {d: statistics.median(tr[d]) for d in DTYPES}
    eval_ratio, train_ratio = med_e["bfloat16"] / med_e["float32"], med_t["bfloat16"] / med_t["float32"]
    print(f"cpu precision: smoke run on {os.cpu_count()} cores, {args.repeat} round(s) (median); native: {native}")
    for d in DTYPES:
        print(f"  {d:9} evaluation of {ev['tasks']} tasks {med_e[d]:5.1f} s   {steps} GRPO step(s) {med_t[d]:5.1f} s")
    print(f"  ratio (bfloat16 / float32): evaluation {eval_ratio:.2f}, training {train_ratio:.2f}")
    print(f"  same final answer in {ev['same_answers']} of {ev['tasks']} tasks")
    if args.json:
        out = {
            "native": native,
            "eval_walls_s": ev["walls_s"],
            "train_runtime_s": tr,
            "eval_ratio": eval_ratio,
            "train_ratio": train_ratio,
            "same_answers": ev["same_answers"],
            "tasks": ev["tasks"],
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
