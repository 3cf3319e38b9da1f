"""The MCP calculator, run from its own environment (it needs ``mcp<2``; Agent Framework needs mcp 2).

One server process is started per evaluation and its session is shared by all concurrent rollouts: the
calculator is stateless, so a shared session is as correct as one per rollout and saves a process start
(about a second) per rollout. The server runs without network where the system allows (its own network namespace,
:func:`harness.tools.servers.no_network_prefix`; with the machine's network where ``unshare`` fails) and with an
address-space limit where ``prlimit`` exists, each calculation in a child process with a CPU-time limit, and each
call has a timeout: a hostile expression costs one error, not the machine or the session.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness.tools.servers import ToolServer, register_tool_server, resolve_command, server_env

# Agent Framework pings the server on connect with an API mcp 2 marks deprecated; harmless, and noisy per run.
warnings.filterwarnings("ignore", message="ping is removed", module="agent_framework")

MEMORY_LIMIT_BYTES = 1 << 30
CALL_TIMEOUT_S = 10
CALL_CPU_LIMIT_S = 2
"""CPU seconds one calculation may take; the package evaluates ``9**9**9`` or ``factorial(10**9)`` in the server's
event loop, which would otherwise block every later call for minutes."""

# Runs the package's server with each calculation in a forked child under a CPU limit: a runaway expression
# costs one error, not the session. The server logs every request (INFO) and the mcp-2 client's discovery probe
# it does not know (WARNING) on stderr, and its FastMCP ignores FASTMCP_LOG_LEVEL: keep errors only.
SERVER_CODE = f"""
import logging, os, resource
import mcp_server_calculator as m, mcp_server_calculator.calculator as c
logging.disable(logging.WARNING)
plain = c.evaluate
def evaluate(expression):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            resource.setrlimit(resource.RLIMIT_CPU, ({CALL_CPU_LIMIT_S}, {CALL_CPU_LIMIT_S + 1}))
            out = "=" + plain(expression)
        except BaseException as exc:
            out = "!" + type(exc).__name__ + ": " + str(exc)
        data = out.encode("utf-8", "replace")[:65536]
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    out = b"".join(chunks).decode("utf-8", "replace")
    if not out:
        raise ValueError("the calculation exceeded its limits ({CALL_CPU_LIMIT_S} s CPU, memory)")
    if out[0] == "!":
        raise ValueError(out[1:])
    return out[1:]
c.evaluate = evaluate
m.main()
"""


@register_tool_server
class Calculator(ToolServer):
    """``mcp-server-calculator`` from the ``calculator`` environment, each calculation in a child under a CPU limit."""

    name = "calculator"
    env = "calculator"
    code = SERVER_CODE
    packages = ("mcp-server-calculator", "mcp")
    memory_bytes = MEMORY_LIMIT_BYTES


@contextlib.asynccontextmanager
async def open_calculator(python: Path | None = None) -> AsyncIterator[Any]:
    """An entered Agent Framework ``MCPStdioTool`` connected to one calculator server."""
    from agent_framework import MCPStdioTool

    cmd = resolve_command(Calculator, python)
    tool = MCPStdioTool(
        name="calculator",
        command=cmd[0],
        args=cmd[1:],
        env=server_env(),
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
