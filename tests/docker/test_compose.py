"""compose.yaml: valid for both profiles, GPU reservations and health checks where they belong, no keys in it;
and brought up for real on CPU: the policy server answers a chat completion, the calculator computes over MCP."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from support_docker import COMPOSE_FILE, ROOT, compose_cli, compose_json, require_engine_and_images, unavailable

pytestmark = pytest.mark.docker

GPU_SERVICES = {"policy-server", "user-simulator", "math-train", "math-eval", "tau2-train", "tau2-eval"}
CPU_SERVICES = {"policy-server-cpu", "math-train-cpu", "math-eval-cpu", "tau2-eval-cpu"}
SECRET_NAME = re.compile(r"(^|_)(API_?KEY|[A-Z]*TOKEN|SECRET[A-Z_]*|PASSWORD)$")


@pytest.fixture(scope="module")
def cli() -> list[str]:
    found = compose_cli()
    if found is None:
        unavailable("Docker Compose v2 is not installed (scripts/docker-setup.sh installs it)")
    return found


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_compose_config_is_valid(cli: list[str], profile: str) -> None:
    config = compose_json(cli, "--profile", profile)
    services = set(config["services"])
    assert "calculator" in services
    assert (GPU_SERVICES if profile == "gpu" else CPU_SERVICES) <= services
    assert not (CPU_SERVICES if profile == "gpu" else GPU_SERVICES) & services


def test_gpu_services_reserve_gpus(cli: list[str]) -> None:
    services = compose_json(cli, "--profile", "gpu")["services"]
    for name in GPU_SERVICES:
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices), name
    for name in ("math-train", "tau2-train"):
        assert "harness-gpu" in services[name]["image"]
    assert services["math-train"]["command"][:3] == ["harness", "run", "math"]
    assert "--backend" in services["math-train"]["command"]
    cpu = compose_json(cli, "--profile", "cpu")["services"]
    for name in CPU_SERVICES | {"calculator"}:
        assert "deploy" not in cpu[name] or not cpu[name]["deploy"].get("resources", {}).get("reservations"), name


def test_tau2_train_is_wired_to_policy_and_user_simulator(cli: list[str]) -> None:
    services = compose_json(cli, "--profile", "gpu")["services"]
    for name in ("tau2-train", "tau2-eval"):
        svc = services[name]
        assert svc["command"][:3] == ["harness", "run", "tau2"], name
        assert svc["environment"]["HARNESS_USER_SIMULATOR_URL"] == "http://user-simulator:8000/v1", name
        assert svc["depends_on"]["user-simulator"]["condition"] == "service_healthy", name
        assert any(d["driver"] == "nvidia" for d in svc["deploy"]["resources"]["reservations"]["devices"]), name
    assert services["user-simulator"]["deploy"]["resources"]["reservations"]["devices"]
    # the policy is served by the job itself (train: each checkpoint in turn); eval serves the given checkpoint
    assert "--eval-only" in services["tau2-eval"]["command"]
    assert "--eval-only" not in services["tau2-train"]["command"]
    assert any(v["target"] == "/models/policy" for v in services["tau2-eval"]["volumes"])


def test_services_have_healthchecks(cli: list[str]) -> None:
    gpu, cpu = compose_json(cli, "--profile", "gpu"), compose_json(cli, "--profile", "cpu")
    services = {**gpu["services"], **cpu["services"]}
    for name in ("policy-server", "policy-server-cpu", "user-simulator", "calculator"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name
    assert "/v1/models" in " ".join(services["policy-server-cpu"]["healthcheck"]["test"])
    assert services["calculator"]["network_mode"] == "none"
    for name, svc in services.items():  # no image is ever pulled: all of them are built locally
        assert svc.get("pull_policy") == "never", name


def test_no_literal_keys(cli: list[str]) -> None:
    text = COMPOSE_FILE.read_text()
    assert not re.search(r"sk-[A-Za-z0-9]{16,}|hf_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,}", text)
    raw = yaml.safe_load(text)
    seen = 0

    def walk(node: object) -> None:
        nonlocal seen
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and SECRET_NAME.search(key):
                    seen += 1
                    assert value in (None, f"${{{key}:-}}", f"${{{key}}}"), f"{key}: {value!r} (pass it through)"
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(raw)
    assert seen, "no key is passed through at all"
    # With keys in the environment, the rendered config carries them only where they are passed through.
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key-0000")
    rendered = json.dumps(compose_json(cli, "--profile", "cpu", env=env))
    assert "sk-test-not-a-real-key-0000" in rendered  # passthrough works ...
    assert "sk-test" not in text  # ... and nothing is stored


# --- compose up, for real (CPU profile) ------------------------------------------------------------------------------


def _containers_of(project: str) -> list[str]:
    """Containers (running or not) that compose created for ``project``."""
    return subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
    ).stdout.split()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_compose_up_cpu(cli: list[str], smoke_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_engine_and_images("harness-cpu:latest", "harness-calculator:latest")
    project = f"harness-test-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    env = dict(
        os.environ,
        POLICY_MODEL_PATH=str(smoke_model),
        POLICY_PORT=str(port),
        POLICY_MAX_MODEL_LEN="2048",
        HARNESS_UID=str(os.getuid()),
        HARNESS_GID=str(os.getgid()),
    )
    base = [*cli, "-f", str(COMPOSE_FILE), "-p", project, "--profile", "cpu"]
    try:
        up = subprocess.run(
            [*base, "up", "-d", "--wait", "--wait-timeout", "600", "policy-server-cpu", "calculator"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=900,
        )
        if up.returncode != 0:
            logs = subprocess.run([*base, "logs", "--tail", "60"], capture_output=True, text=True, env=env, cwd=ROOT)
            pytest.fail(f"compose up failed:\n{up.stderr[-3000:]}\n{logs.stdout[-4000:]}")

        # The policy server, over HTTP from the host.
        url = f"http://127.0.0.1:{port}/v1"
        models = httpx.get(f"{url}/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["policy"]
        reply = httpx.post(
            f"{url}/chat/completions",
            json={"model": "policy", "messages": [{"role": "user", "content": "What is 2+3?"}], "max_tokens": 16},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["choices"][0]["message"]["content"] or body["choices"][0]["message"].get("tool_calls")
        assert body["usage"]["completion_tokens"] > 0

        # The calculator service is healthy, and a fresh one from `compose run` answers an MCP client.
        ps = subprocess.run([*base, "ps", "--format", "json", "calculator"], capture_output=True, text=True, env=env)
        rows = [json.loads(line) for line in ps.stdout.splitlines() if line.strip()]
        rows = rows[0] if rows and isinstance(rows[0], list) else rows
        assert rows and rows[0]["Health"] == "healthy", ps.stdout

        from harness.tools.calculator import COMMAND_ENV, calculate, open_calculator

        monkeypatch.setenv(COMMAND_ENV, json.dumps([*base, "run", "--rm", "-T", "calculator"]))

        async def compute() -> list[str]:
            async with open_calculator() as tool:
                return [await calculate(tool, "6*7"), await calculate(tool, "2**10 - 24")]

        started = time.monotonic()
        assert asyncio.run(compute()) == ["42", "1000"]
        assert time.monotonic() - started < 120
    finally:
        down = subprocess.run(
            [*base, "down", "-v", "--remove-orphans", "--timeout", "10"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        assert down.returncode == 0, down.stderr
    assert _containers_of(project) == []


@pytest.mark.slow
def test_compose_tau2_eval_cpu(cli: list[str], smoke_model: Path, tmp_path: Path) -> None:
    """The CPU profile's τ² smoke evaluation in a container: policy and user simulator served inside it by the
    real engine, τ²'s evaluator scoring, a results row written to the mounted results folder."""
    require_engine_and_images("harness-cpu:latest")
    project = f"harness-test-{uuid.uuid4().hex[:8]}"
    results, artifacts = tmp_path / "results", tmp_path / "artifacts"
    results.mkdir()
    artifacts.mkdir()
    env = dict(
        os.environ,
        HARNESS_RESULTS_DIR=str(results),
        HARNESS_ARTIFACTS_DIR=str(artifacts),
        HARNESS_CACHE_DIR=str(smoke_model.parents[1]),  # the cache that holds the converted model
        HARNESS_UID=str(os.getuid()),
        HARNESS_GID=str(os.getgid()),
        TAU2_LIMIT="1",
        TAU2_TRIALS="2",
    )
    base = [*cli, "-f", str(COMPOSE_FILE), "-p", project, "--profile", "cpu"]
    try:
        proc = subprocess.run(
            [*base, "run", "--rm", "-T", "tau2-eval-cpu"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=1500,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans", "--timeout", "10"], env=env, cwd=ROOT, timeout=300)
    import csv

    rows = list(csv.DictReader((results / "tau2" / "runs.csv").open()))
    assert len(rows) == 1 and rows[0]["status"] == "complete" and rows[0]["engine"] == "none"
    assert rows[0]["n_tasks"] == "1" and rows[0]["samples_per_task"] == "2"
    manifest = json.loads(next((results / "tau2" / "manifests").glob("*.json")).read_text())
    assert manifest["user_simulator"]["source"] == "served"
    assert set(manifest["phases"]["after"]["pass_hat_k"]) == {"1", "2"}
    native = next(artifacts.glob("runs/*/native-results-after.json"))
    from tau2.data_model.simulation import Results

    assert len(Results.load(native).simulations) + int(rows[0]["infra_errors_after"]) == 2
    assert _containers_of(project) == []
