"""Stdio tool servers: a tool that runs as a process of its own, in a helper environment of its own (the MCP
calculator needs ``mcp<2`` while Agent Framework needs mcp 2).

A tool server declares what it is (:class:`ToolServer`: name, environment, server code, the packages a run records,
limits) and registers itself; the built-in ones are loaded on the first lookup, a benchmark's own register when its
code is imported. Where it runs is the backend's (:meth:`harness.backends.Backend.tool_command`): a run exports each
registered server's command as ``HARNESS_TOOL_<NAME>_CMD`` (:func:`harness.backends.tools.tool_commands`), and the
agent's MCP client starts whatever :func:`resolve_command` returns — that command, or this machine's own.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from harness.errors import HarnessError
from harness.paths import env_python
from harness.registry import Registry


class ToolServer:
    """A tool server run as ``<env's python> -c <code>``, serving MCP on stdio."""

    name: ClassVar[str]
    env: ClassVar[str]
    """The helper environment it runs in: ``.venvs/<env>`` here (``HARNESS_ENV_<ENV>``), that environment's image
    under the Docker backend."""
    code: ClassVar[str]
    """Python source run with ``-c``."""
    packages: ClassVar[tuple[str, ...]] = ()
    """Packages of its environment whose versions a run records, as ``<name>:<package>``."""
    memory_bytes: ClassVar[int] = 1 << 30
    """Address-space limit of the server process."""


TOOL_SERVERS: Registry[type[ToolServer]] = Registry("tool server", HarnessError)
"""Tool servers by name; the package (:mod:`harness.tools`) loads the built-in ones on the first lookup."""
register_tool_server = TOOL_SERVERS.register


def tool_servers() -> list[type[ToolServer]]:
    """Every registered tool server: the built-in ones and those of the benchmarks imported so far."""
    return [TOOL_SERVERS.get(name) for name in TOOL_SERVERS.names()]


def command_env(server: type[ToolServer]) -> str:
    """The variable that carries the server's command (a JSON list), e.g. ``HARNESS_TOOL_CALCULATOR_CMD``."""
    return f"HARNESS_TOOL_{server.name.upper().replace('-', '_')}_CMD"


@functools.cache
def no_network_prefix() -> tuple[str, ...]:
    """A command prefix that runs a server in a network namespace of its own (no interfaces but loopback, down),
    where the system allows one: as root ``unshare --net``, otherwise in a user namespace. Empty where neither
    works (the Docker backend's servers have ``--network none`` regardless)."""
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


def local_command(server: type[ToolServer], python: Path | None = None) -> list[str]:
    """The server on this machine, from its environment, without network and under its memory limit where the
    system allows."""
    python = python or env_python(server.env)
    if not python.exists():
        raise HarnessError(f"{server.name}: environment not found at {python.parent.parent} (run `make env`)")
    cmd = [str(python), "-c", server.code]
    prlimit = shutil.which("prlimit")
    if prlimit:
        cmd = [prlimit, f"--as={server.memory_bytes}", "--core=0", "--", *cmd]
    return [*no_network_prefix(), *cmd]


def resolve_command(server: type[ToolServer], python: Path | None = None) -> list[str]:
    """The command that starts ``server``: the run's (``HARNESS_TOOL_<NAME>_CMD``, set from its backend), else the
    local one; an explicit ``python`` always means the local one from that interpreter."""
    override = os.environ.get(command_env(server))
    if override and python is None:
        try:
            cmd: Any = json.loads(override)
        except json.JSONDecodeError:
            cmd = None
        if not (isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd)):
            raise HarnessError(f"{command_env(server)} must be a JSON list of strings")
        return cmd
    return local_command(server, python)


def server_env() -> dict[str, str]:
    """The environment a tool server starts with: only what it needs, no API keys or tokens of the caller."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    if "DOCKER_HOST" in os.environ:  # the Docker backend's servers are `docker run`s
        env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
    return env
