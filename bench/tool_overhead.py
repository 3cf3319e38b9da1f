"""Per-rollout cost of the calculator tool: a new stdio server per rollout (the reference script's way) vs one pooled
session.

The reference script opens ``MCPStdioTool(command="uvx", args=["mcp-server-calculator"])`` inside every rollout, so each
rollout pays a process start and an MCP handshake. The harness opens one session per evaluation and shares it
between concurrent rollouts (the calculator is stateless). Both ways here use the same server from the same
environment, so the difference is the per-rollout connection cost alone (``uvx`` resolution, which the seed also
pays, is not even counted: a lower bound on the reference script's cost). The pooled side includes its one server start.

Rounds alternate the two ways (which one goes first rotates). Prints, for R rollouts of C calls each: seconds per
rollout and milliseconds per call for both ways (min / median over the rounds), and the ratio harness / seed per
rollout from the medians (target <= 0.1).

Run: ``python bench/tool_overhead.py [--rollouts 20] [--calls 3] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.tools.calculator import calculate, open_calculator

EXPRESSIONS = ["12 * 7 + 3", "(4.5 - 1.25) / 3", "2 ** 10 - 24"]
EXPECTED = ["87", "1.0833333333333333", "1000"]


def check(result: str, i: int) -> None:
    if result.strip() != EXPECTED[i % len(EXPECTED)]:
        raise RuntimeError(f"calculator answered {result!r} to {EXPRESSIONS[i % len(EXPRESSIONS)]!r}")


async def seed_way(rollouts: int, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(rollouts):
        async with open_calculator() as tool:  # a new server process and handshake per rollout
            for i in range(calls):
                check(await calculate(tool, EXPRESSIONS[i % len(EXPRESSIONS)]), i)
    return time.perf_counter() - start


async def harness_way(rollouts: int, calls: int) -> float:
    start = time.perf_counter()
    async with open_calculator() as tool:  # one server per evaluation, shared by every rollout

        async def rollout() -> None:
            for i in range(calls):
                check(await calculate(tool, EXPRESSIONS[i % len(EXPRESSIONS)]), i)

        await asyncio.gather(*(rollout() for _ in range(rollouts)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=20, help="default: the math test split")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    asyncio.run(harness_way(1, 1))  # imports and first server start, outside the timings
    seed: list[float] = []
    ours: list[float] = []
    for r in range(args.rounds):
        ways = [("seed", seed_way, seed), ("harness", harness_way, ours)]
        for _, fn, into in ways if r % 2 == 0 else ways[::-1]:
            into.append(asyncio.run(fn(args.rollouts, args.calls)))
    n_calls = args.rollouts * args.calls
    ratio = statistics.median(ours) / statistics.median(seed)
    print(f"tool_overhead: {args.rollouts} rollouts x {args.calls} calls, {args.rounds} rounds (min / median)")
    for name, times in (("seed (server per rollout)", seed), ("harness (pooled session)", ours)):
        per_rollout = [t / args.rollouts for t in times]
        per_call = [1000 * t / n_calls for t in times]
        print(
            f"  {name:26} {min(per_rollout):.3f} / {statistics.median(per_rollout):.3f} s per rollout  "
            f"{min(per_call):.1f} / {statistics.median(per_call):.1f} ms per call"
        )
    print(f"  ratio harness/seed per rollout (medians): {ratio:.3f}  (target <= 0.100)")
    if args.json:
        figures = {"rollouts": args.rollouts, "calls": args.calls, "seed_s": seed, "harness_s": ours, "ratio": ratio}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
