"""The MCP calculator over real MCP (stdio, its own environment), shared by concurrent callers."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from harness.tools.calculator import calculate, open_calculator


def test_calculator_over_mcp() -> None:
    async def go() -> list[str]:
        async with open_calculator() as tool:
            names = [f.name for f in tool.functions]
            assert "calculate" in names
            return list(await asyncio.gather(*(calculate(tool, e) for e in ["2 + 3 * 4", "3/2", "(1 + 2) ** 3"])))

    assert asyncio.run(go()) == ["14", "1.5", "27"]


def test_calculator_errors_are_text_and_run_nothing(tmp_path: Path) -> None:
    canary = tmp_path / f"pwned-{uuid.uuid4().hex}"

    async def go() -> list[str]:
        async with open_calculator() as tool:
            hostile = [f"__import__('os').system('touch {canary}')", "().__class__", "1/0", "x + 1"]
            return [await calculate(tool, e) for e in hostile]

    outputs = asyncio.run(go())
    assert not canary.exists()
    assert all(o.startswith("Error") or "Unsupported" in o or "error" in o.lower() for o in outputs), outputs


def test_calculator_survives_a_runaway_expression() -> None:
    """A huge power hits the memory limit or the call timeout; the call returns an error instead of hanging."""

    async def go() -> tuple[str, float]:
        async with open_calculator() as tool:
            start = time.monotonic()
            out = await calculate(tool, "9 ** 9 ** 9")
            return out, time.monotonic() - start

    out, elapsed = asyncio.run(go())
    assert out.startswith("Error"), out
    assert elapsed < 60
