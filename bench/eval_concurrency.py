"""The smoke evaluation's concurrency: all 20 test tasks at once (the smoke profile's setting) against 8 at a time
(the reference configuration's, and the smoke profile's before).

One CPU model server for the smoke checkpoint (``harness.serving.server.launch``, the smoke profile's serving
arguments); every pass below is the harness's own evaluation (``harness.rollout.evaluate``: agent, MCP calculator,
records) of the math test split, greedy, at the given concurrency. A first pass at each concurrency warms the
server up and is not timed; then the timed passes alternate (A B, B A, ...) so that load on a shared machine
hits both sides alike.

Prints the wall time per side (min / median), the ratio (spec's concurrency / 8; below 1 is faster), and
whether the two sides gave the same answers (greedy decoding: batching on a CPU may change the last bits of a
logit, and then an answer; in float32 it did not change any of the 20, in bfloat16 -- the smoke profile's
``native`` on a CPU with bf16 arithmetic -- it changed 9).

Run: ``python bench/eval_concurrency.py [--repeat 2] [--against 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def one_pass(bench: Any, tasks: list[Any], base_url: str, model: str, spec: Any, concurrency: int, out: Path) -> Any:
    from harness.rollout.evaluate import EvalSettings, evaluate

    ev = spec.evaluation
    settings = EvalSettings(
        base_url=base_url,
        model=model,
        temperature=ev.temperature,
        max_tokens=ev.max_tokens,
        max_turns=spec.agent.max_turns,
        concurrency=concurrency,
        samples_per_task=ev.samples_per_task,
        request_timeout_s=ev.request_timeout_s,
        retries=ev.retries,
        seed=spec.seeds[0],
    )
    start = time.perf_counter()
    episodes = asyncio.run(evaluate(bench, tasks, settings, out))
    return time.perf_counter() - start, episodes


def answers(episodes: Any) -> dict[str, str]:
    return {e.task_id: e.final_text for e in episodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--against", type=int, default=8, help="the concurrency to compare with")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from harness.assets.data import load_split
    from harness.assets.models import prepare_model
    from harness.rollout.loading import open_benchmark
    from harness.serving.hardware import serving_dtype
    from harness.serving.server import launch

    spec, bench, _ = open_benchmark("math", "smoke")
    rows, _ = load_split(spec.dataset, spec.evaluation.split)
    tasks = bench.tasks(rows)
    ours = spec.evaluation.concurrency
    sides = {ours: f"concurrency {ours} (smoke profile)", args.against: f"concurrency {args.against}"}
    if len(sides) < 2:
        raise SystemExit(f"the smoke profile's concurrency is already {ours}: nothing to compare")
    checkpoint = prepare_model(spec.model)
    walls: dict[int, list[float]] = {c: [] for c in sides}
    texts: dict[int, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="eval-concurrency-") as tmp_name:
        tmp = Path(tmp_name)
        server = launch(checkpoint, spec.model.name, spec.serving, tmp / "server.log")
        try:
            server.wait_ready(spec.serving.startup_timeout_s)
            url, model = server.endpoint.base_url, server.endpoint.model
            for c in sides:  # warm-up, not timed
                one_pass(bench, tasks, url, model, spec, c, tmp / f"warm-{c}.jsonl")
            for r in range(args.repeat):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for c in order:
                    took, episodes = one_pass(bench, tasks, url, model, spec, c, tmp / f"r{r}-{c}.jsonl")
                    walls[c].append(took)
                    texts.setdefault(c, answers(episodes))
                    print(f"  round {r + 1} {sides[c]}: {len(tasks)} tasks in {took:.1f} s", flush=True)
        finally:
            server.stop()
    same = sum(texts[ours][t] == texts[args.against].get(t) for t in texts[ours])
    ratio = statistics.median(walls[ours]) / statistics.median(walls[args.against])
    print(f"eval concurrency: math test split ({len(tasks)} tasks, greedy), {args.repeat} rounds (min / median)")
    for c, name in sides.items():
        print(f"  {name:32} min {min(walls[c]):5.1f} s  median {statistics.median(walls[c]):5.1f} s")
    print(f"  ratio ({sides[ours]} / {sides[args.against]}): {ratio:.2f}")
    print(f"  same final answer in {same} of {len(texts[ours])} tasks")
    if args.json:
        out = {
            "concurrency": ours,
            "against": args.against,
            "tasks": len(tasks),
            "walls_s": {str(c): w for c, w in walls.items()},
            "ratio": ratio,
            "same_answers": same,
            "dtype": serving_dtype(spec.serving.dtype),
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
