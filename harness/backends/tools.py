"""The run's tool servers on its backend: each registered server's command, exported for the run's length."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

from harness.backends.base import Backend
from harness.tools.servers import command_env, tool_servers


@contextlib.contextmanager
def tool_commands(backend: Backend) -> Iterator[dict[str, list[str]]]:
    """For the run's length, every registered tool server starts on the run's backend: its command is exported as
    ``HARNESS_TOOL_<NAME>_CMD``, which the agents' MCP clients (and the engines' child processes) read. The
    variables are put back as they were afterwards."""
    commands = {command_env(server): backend.tool_command(server) for server in tool_servers()}
    previous = {name: os.environ.get(name) for name in commands}
    try:
        for name, cmd in commands.items():
            os.environ[name] = json.dumps(cmd)
        yield commands
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
