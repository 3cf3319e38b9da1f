"""Per-rollout cost of the calculator tool: a new stdio server per rollout (the seed's way) vs one pooled session.

The seed opens ``MCPStdioTool(command="uvx", args=["mcp-server-calculator"])`` inside every rollout, so each
rollout pays a process start and an MCP handshake. The harness opens one session per evaluation and shares it
between concurrent rollouts (the calculator is stateless). Both ways here use the same server from the same
environment, so the difference is the per-rollout connection cost alone (``uvx`` resolution, which the seed also
pays, is not even counted: a lower bound on the seed's cost).

Prints, for R rollouts of C calls each: seconds per rollout and per call for both ways, and the ratio
harness / seed (target <= 0.1).

Run: ``python bench/tool_overhead.py [--rollouts 20] [--calls 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from harness.tools.calculator import calculate, open_calculator

EXPRESSIONS = ["12 * 7 + 3", "(4.5 - 1.25) / 3", "2 ** 10 - 24"]


async def seed_way(rollouts: int, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(rollouts):
        async with open_calculator() as tool:  # a new server process and handshake per rollout
            for i in range(calls):
                await calculate(tool, EXPRESSIONS[i % len(EXPRESSIONS)])
    return time.perf_counter() - start


async def harness_way(rollouts: int, calls: int) -> float:
    start = time.perf_counter()
    async with open_calculator() as tool:  # one server per evaluation, shared by every rollout

        async def rollout() -> None:
            for i in range(calls):
                await calculate(tool, EXPRESSIONS[i % len(EXPRESSIONS)])

        await asyncio.gather(*(rollout() for _ in range(rollouts)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rollouts", type=int, default=20, help="default: the math test split")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    seed_s = asyncio.run(seed_way(args.rollouts, args.calls))
    ours_s = asyncio.run(harness_way(args.rollouts, args.calls))
    n_calls = args.rollouts * args.calls
    print(f"tool_overhead: {args.rollouts} rollouts x {args.calls} calls")
    print(f"  seed (server per rollout): {seed_s / args.rollouts:.3f} s/rollout  {seed_s / n_calls * 1000:.1f} ms/call")
    print(f"  harness (pooled session):  {ours_s / args.rollouts:.3f} s/rollout  {ours_s / n_calls * 1000:.1f} ms/call")
    print(f"  ratio harness/seed per rollout: {ours_s / seed_s:.3f}  (target <= 0.100)")


if __name__ == "__main__":
    main()
