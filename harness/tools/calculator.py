"""The MCP calculator, run from its own environment (it needs ``mcp<2``; Agent Framework needs mcp 2).

One server process is started per evaluation and its session is shared by all concurrent rollouts: the
calculator is stateless, so a shared session is as correct as one per rollout and saves a process start
(about a second) per rollout. The server runs with an address-space limit so a hostile expression cannot eat
the machine's memory, and each call has a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.paths import env_python

# Agent Framework pings the server on connect with an API mcp 2 marks deprecated; harmless, and noisy per run.
warnings.filterwarnings("ignore", message="ping is removed", module="agent_framework")

MEMORY_LIMIT_BYTES = 1 << 30
CALL_TIMEOUT_S = 10


COMMAND_ENV = "HARNESS_CALCULATOR_CMD"


def calculator_command(python: Path | None = None) -> list[str]:
    """The command that starts the calculator server on stdio, under resource limits where available.

    ``HARNESS_CALCULATOR_CMD`` (a JSON list) overrides it; the Docker backend sets it to a ``docker run`` of the
    calculator image without network.
    """
    override = os.environ.get(COMMAND_ENV)
    if override and python is None:
        cmd = json.loads(override)
        if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)):
            raise HarnessError(f"{COMMAND_ENV} must be a JSON list of strings")
        return cmd
    python = python or env_python("calculator")
    if not python.exists():
        raise HarnessError(f"calculator environment not found at {python.parent.parent} (run `make env`)")
    # The server logs every request (INFO) and the mcp-2 client's discovery probe it does not know (WARNING) on
    # stderr, and its FastMCP ignores FASTMCP_LOG_LEVEL: keep errors only.
    cmd = [str(python), "-c", "import logging, mcp_server_calculator as m; logging.disable(logging.WARNING); m.main()"]
    prlimit = shutil.which("prlimit")
    if prlimit:
        cmd = [prlimit, f"--as={MEMORY_LIMIT_BYTES}", "--core=0", "--", *cmd]
    return cmd


def calculator_env() -> dict[str, str]:
    # Only what the server needs: no API keys or tokens from the caller's environment.
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    if "DOCKER_HOST" in os.environ:  # the Docker backend's calculator is a `docker run`
        env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    return env


@contextlib.asynccontextmanager
async def open_calculator(python: Path | None = None) -> AsyncIterator[Any]:
    """An entered Agent Framework ``MCPStdioTool`` connected to one calculator server."""
    from agent_framework import MCPStdioTool

    cmd = calculator_command(python)
    tool = MCPStdioTool(
        name="calculator",
        command=cmd[0],
        args=cmd[1:],
        env=calculator_env(),
        load_prompts=False,
        tool_result_content="content_only",
        request_timeout=CALL_TIMEOUT_S,
        description="A calculator that evaluates math expressions.",
    )
    async with tool:
        yield tool


async def calculate(tool: Any, expression: str) -> str:
    """Call the calculator's ``calculate`` tool; errors come back as text, as an agent would see them."""
    try:
        result = await tool.call_tool("calculate", expression=expression)
    except Exception as exc:  # the model sees tool failures as text, like any tool error
        return f"Error: {exc}"
    if isinstance(result, str):
        return result
    return "".join(getattr(c, "text", "") or "" for c in result)
