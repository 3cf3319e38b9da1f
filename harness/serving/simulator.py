"""The services a run holds for its whole length, apart from the policy server (:mod:`harness.serving.policy`):
the user simulator of benchmarks with a simulated user, and the commands of the tool servers the agents start.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console

from harness.assets.models import checkpoint_hash, prepare_model
from harness.serving.server import serve
from harness.spec.schema import BenchmarkSpec
from harness.tools.servers import command_env, tool_servers
from harness.ui import progress

SIMULATOR_URL_ENV = "HARNESS_USER_SIMULATOR_URL"
SIMULATOR_MODEL_ENV = "HARNESS_USER_SIMULATOR_MODEL"
SIMULATOR_KEY_ENV = "HARNESS_USER_SIMULATOR_API_KEY"

Endpoint = tuple[str, str, str]
"""(base_url, model, api_key)"""


def start_user_simulator(
    spec: BenchmarkSpec,
    run_dir: Path,
    stack: contextlib.ExitStack,
    backend: Any,
    labels: dict[str, str],
    console: Console,
) -> tuple[Endpoint | None, dict[str, str]]:
    """The user simulator for the whole run, and what the manifest records of it (model, hash or endpoint host;
    never a key). Served here (stopped when ``stack`` closes) unless ``HARNESS_USER_SIMULATOR_URL`` names an
    external endpoint. (None, {}) for a benchmark without one."""
    sim = spec.user_simulator
    if sim is None:
        return None, {}
    url = os.environ.get(SIMULATOR_URL_ENV)
    if url:
        model = os.environ.get(SIMULATOR_MODEL_ENV) or sim.model.name
        record = {"source": "endpoint", "model": model, "host": urlsplit(url).hostname or ""}
        console.print(f"  user simulator: {model} at external endpoint {record['host']}")
        return (url, model, os.environ.get(SIMULATOR_KEY_ENV, "EMPTY")), record
    with console.status("preparing the user-simulator model"):
        checkpoint = prepare_model(sim.model)
        digest = checkpoint_hash(checkpoint)
    with progress(console) as bars:
        bar = bars.add_task("user simulator: starting model server", total=None)
        server = stack.enter_context(
            serve(
                checkpoint,
                f"user-simulator-{sim.model.name}",
                spec.serving,
                run_dir / "server-user-simulator.log",
                tick=lambda s: bars.update(bar, description=f"user simulator: starting ({s:.0f} s)"),
                backend=backend,
                labels={**labels, "harness.role": "user-simulator"},
            )
        )
    console.print(f"  user simulator: {sim.model.name} {digest[:12]} served for the run (never trained)")
    return (server.endpoint.base_url, server.endpoint.model, "EMPTY"), {
        "source": "served",
        "model": sim.model.name,
        "hash": digest,
    }


@contextlib.contextmanager
def tool_commands(backend: Any) -> Iterator[dict[str, list[str]]]:
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
