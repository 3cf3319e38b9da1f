"""The MCP calculator, run from its own environment (it needs ``mcp<2``; Agent Framework needs mcp 2).

One server process is started per evaluation and its session is shared by all concurrent rollouts: the
calculator is stateless, so a shared session is as correct as one per rollout and saves a process start
(about a second) per rollout. The server runs without network (its own network namespace) and with an
address-space limit, each calculation in a child process with a CPU-time limit, and each call has a timeout: a
hostile expression costs one error, not the machine or the session.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
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
    cmd = [str(python), "-c", SERVER_CODE]
    prlimit = shutil.which("prlimit")
    if prlimit:
        cmd = [prlimit, f"--as={MEMORY_LIMIT_BYTES}", "--core=0", "--", *cmd]
    return [*no_network_prefix(), *cmd]


@functools.cache
def no_network_prefix() -> tuple[str, ...]:
    """A command prefix that runs the calculator in a network namespace of its own (no interfaces but loopback,
    down), where the system allows one: as root ``unshare --net``, otherwise in a user namespace. Empty where
    neither works (the Docker backend's calculator has ``--network none`` regardless)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    for prefix in ([unshare, "--net", "--"], [unshare, "--user", "--map-root-user", "--net", "--"]):
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return tuple(prefix)
    return ()


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
