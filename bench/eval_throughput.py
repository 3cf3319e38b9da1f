"""Harness overhead on the evaluation path: the math evaluation through the harness vs the same chat requests
replayed straight to the model server at the same concurrency.

1. Serve the smoke model (vLLM CPU) once.
2. Harness: ``harness.evaluate`` runs the math test tasks (agent, MCP calculator, retries, JSONL records), with
   every chat request body recorded.
3. Raw: the recorded request bodies are replayed with plain ``httpx`` at the same concurrency.
4. Harness again, so that server warm-up does not favour either side; the better of the two harness passes counts.

Prints tasks/s, requests/s for both and the harness overhead = 1 - (harness req/s / raw req/s) (target <= 5%).

Run: ``python bench/eval_throughput.py [--tasks 20] [--concurrency 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from harness.benchmark import open_benchmark
from harness.data import load_split
from harness.evaluate import EvalSettings, evaluate
from harness.models import prepare_model
from harness.serving import serve


async def replay(base_url: str, bodies: list[dict[str, Any]], concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=concurrency * 2)) as client:

        async def one(body: dict[str, Any]) -> None:
            async with sem:
                r = await client.post(base_url + "/chat/completions", json=body)
                r.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    spec, bench, _ = open_benchmark("math", "smoke")
    rows, _ = load_split(spec.dataset, spec.evaluation.split)
    tasks = bench.tasks(rows)[: args.tasks]
    model = prepare_model(spec.model)
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(model, spec.model.name, spec.serving, Path(tmp) / "server.log") as srv,
    ):

        def settings(log: list[dict[str, Any]] | None) -> EvalSettings:
            return EvalSettings(
                base_url=srv.endpoint.base_url,
                model=spec.model.name,
                temperature=0.0,
                max_tokens=args.max_tokens,
                max_turns=spec.agent.max_turns,
                concurrency=args.concurrency,
                samples_per_task=1,
                request_timeout_s=300,
                retries=0,
                seed=0,
                request_log=log,
            )

        harness_times: list[float] = []
        bodies: list[dict[str, Any]] = []
        for i in range(2):
            log: list[dict[str, Any]] = []
            start = time.perf_counter()
            asyncio.run(evaluate(bench, tasks, settings(log), Path(tmp) / f"rollouts-{i}.jsonl"))
            harness_times.append(time.perf_counter() - start)
            bodies = log
            if i == 0:
                raw_s = asyncio.run(replay(srv.endpoint.base_url, bodies, args.concurrency))
    ours = min(harness_times)
    n = len(bodies)
    print(f"eval_throughput: {len(tasks)} tasks, {n} chat requests, concurrency {args.concurrency}")
    passes = ", ".join(f"{t:.1f} s" for t in harness_times)
    print(f"  harness: {len(tasks) / ours:.2f} tasks/s  {n / ours:.2f} req/s  (best of passes: {passes})")
    print(f"  raw:     {n / raw_s:.2f} req/s  ({raw_s:.1f} s)")
    print(f"  harness overhead = 1 - harness/raw = {1 - (n / ours) / (n / raw_s):.1%}  (target <= 5%)")


if __name__ == "__main__":
    main()
