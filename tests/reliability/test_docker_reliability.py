"""Containers: images hold no secret, the calculator container gets none and keeps its limits, nothing is left over.

``docker image inspect`` and ``docker history`` of the built images must not show a secret-like variable or the
value of any secret in this environment (the CA bundle goes in as a build secret, never a layer). The calculator's
container (what the Docker backend starts for the agent's MCP client) runs with a canary key in the caller's
environment: its configuration must not carry it, it has no network, a memory limit, and a runaway expression
costs one error; closing the backend removes it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from support_reliability import FIGURES

pytestmark = pytest.mark.docker

CPU_IMAGE = "harness-cpu:latest"
CALCULATOR_IMAGE = "harness-calculator:latest"


def _require(*refs: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docker"))
    from support_docker import require_engine_and_images

    require_engine_and_images(*refs)


def _secret_values() -> dict[str, str]:
    from harness.backends.docker import is_secret

    return {k: v for k, v in os.environ.items() if is_secret(k) and len(v) >= 8}


@pytest.mark.parametrize("image", [CPU_IMAGE, CALCULATOR_IMAGE])
def test_images_carry_no_secret(image: str) -> None:
    _require(image)
    from harness.backends.docker import is_secret

    inspect = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True, check=True).stdout
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    config = json.loads(inspect)[0]["Config"]
    names = [e.split("=", 1)[0] for e in config.get("Env") or []]
    assert not [n for n in names if is_secret(n)], names
    leaked = [k for k, v in _secret_values().items() if v in inspect or v in history]
    assert leaked == []
    assert "BEGIN CERTIFICATE" not in inspect + history
    FIGURES.add("images searched for secrets")


def test_calculator_container_limits_and_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    _require(CPU_IMAGE, CALCULATOR_IMAGE)
    from harness.backends.docker import DockerBackend
    from harness.tools.calculator import Calculator, calculate, open_calculator
    from harness.tools.servers import command_env

    canary = f"canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("HARNESS_DEPLOY_TOKEN", canary)
    run_id = f"reliability-{uuid.uuid4().hex[:8]}"
    backend = DockerBackend(run_id=run_id)
    monkeypatch.setenv(command_env(Calculator), json.dumps(backend.tool_command(Calculator)))

    def containers() -> list[str]:
        out = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=harness.run_id={run_id}"], capture_output=True, text=True
        ).stdout
        return out.split()

    async def go() -> tuple[list[str], dict]:
        async with open_calculator() as tool:
            (cid,) = containers()
            info = json.loads(subprocess.run(["docker", "inspect", cid], capture_output=True, text=True).stdout)[0]
            outputs = [await calculate(tool, x) for x in ("9**9**9", "__import__('os').system('id')", "2 + 3")]
            return outputs, info

    try:
        started = time.monotonic()
        outputs, info = asyncio.run(go())
        elapsed = time.monotonic() - started
    finally:
        backend.close()
    assert canary not in json.dumps(info)
    assert info["HostConfig"]["NetworkMode"] == "none"
    assert info["HostConfig"]["Memory"] == 512 * 2**20
    assert outputs[0].startswith("Error") and ("exceeded its limits" in outputs[0] or "timed out" in outputs[0])
    assert outputs[1].startswith("Error") and outputs[2] == "5", outputs
    assert elapsed < 60
    deadline = time.monotonic() + 15
    while containers() and time.monotonic() < deadline:
        time.sleep(0.5)
    leaked = containers()
    FIGURES.add("containers leaked", len(leaked))
    assert leaked == []
