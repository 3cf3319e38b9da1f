"""Tool servers: declared and registered by their own modules, started where the run's backend says, their
packages recorded; the runner, the services and the backend interface name none of them."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.backends.local import LocalBackend
from harness.backends.tools import tool_commands
from harness.errors import HarnessError
from harness.run.provenance import run_packages
from harness.tools.calculator import Calculator
from harness.tools.servers import (
    TOOL_SERVERS,
    ToolServer,
    command_env,
    local_command,
    register_tool_server,
    resolve_command,
    tool_servers,
)

ROOT = Path(__file__).resolve().parents[1]


class Echo(ToolServer):
    """A benchmark's own tool server, for these tests (registered by the fixture, removed after)."""

    name: ClassVar[str] = "echo-test"
    env: ClassVar[str] = "calculator"
    code: ClassVar[str] = "print('echo')"
    packages: ClassVar[tuple[str, ...]] = ("mcp",)


@pytest.fixture
def echo() -> Any:
    register_tool_server(Echo)
    yield Echo
    TOOL_SERVERS._classes.pop(Echo.name, None)


def test_the_calculator_is_a_registered_tool_server() -> None:
    assert Calculator in tool_servers()
    assert command_env(Calculator) == "HARNESS_TOOL_CALCULATOR_CMD"
    assert TOOL_SERVERS.get("calculator") is Calculator


def test_another_server_under_a_taken_name_is_refused() -> None:
    class Impostor(ToolServer):
        name = "calculator"
        env = "calculator"
        code = ""

    with pytest.raises(HarnessError, match="tool server 'calculator' is registered twice"):
        register_tool_server(Impostor)


def test_local_command_runs_the_servers_code_from_its_environment(echo: Any) -> None:
    cmd = local_command(echo, Path(sys.executable))
    assert cmd[-3:] == [sys.executable, "-c", "print('echo')"]
    if any(part.endswith("prlimit") for part in cmd):
        assert f"--as={echo.memory_bytes}" in cmd
    with pytest.raises(HarnessError, match=r"echo-test: environment not found at .*make env"):
        local_command(echo, Path("/nowhere/bin/python"))


def test_resolve_command_takes_the_runs_command(monkeypatch: pytest.MonkeyPatch, echo: Any) -> None:
    monkeypatch.setenv(command_env(echo), json.dumps(["docker", "run", "x"]))
    assert resolve_command(echo) == ["docker", "run", "x"]
    assert resolve_command(echo, Path(sys.executable))[-1] == echo.code  # an explicit interpreter is local
    monkeypatch.setenv(command_env(echo), "not json")
    with pytest.raises(HarnessError, match=r"^HARNESS_TOOL_ECHO_TEST_CMD must be a JSON list of strings$"):
        resolve_command(echo)


def test_a_run_exports_every_servers_command_and_puts_the_environment_back(
    monkeypatch: pytest.MonkeyPatch, echo: Any
) -> None:
    """The run's backend decides how each registered server starts, a benchmark's own server included; afterwards
    the variables are as they were (one unset, one with its earlier value)."""

    class Recorder(LocalBackend):
        def tool_command(self, server: type[ToolServer]) -> list[str]:
            return ["run-on-backend", server.name]

    monkeypatch.delenv(command_env(Calculator), raising=False)
    monkeypatch.setenv(command_env(echo), '["earlier"]')
    with tool_commands(Recorder()) as commands:
        assert commands[command_env(Calculator)] == ["run-on-backend", "calculator"]
        assert resolve_command(Calculator) == ["run-on-backend", "calculator"]
        assert resolve_command(echo) == ["run-on-backend", "echo-test"]
    assert command_env(Calculator) not in os.environ
    assert os.environ[command_env(echo)] == '["earlier"]'


def test_a_run_records_each_servers_packages(echo: Any) -> None:
    packages = run_packages()
    assert packages.get("calculator:mcp-server-calculator") and packages.get("calculator:mcp")
    assert packages["echo-test:mcp"] == packages["calculator:mcp"]  # the same environment, read by its own python


def test_no_core_module_names_a_tool() -> None:
    """The runner, its services and record, provenance and the backend interface know tool servers only through
    the registry (the Docker backend maps environments to images, the calculator's among them)."""
    core = ["run/runner.py", "serving/simulator.py", "run/record.py", "run/provenance.py", "run/plan.py"]
    core += ["backends/base.py", "backends/local.py"]
    named = [m for m in core if re.search(r"calculat", (ROOT / "harness" / m).read_text(), re.IGNORECASE)]
    assert named == []
