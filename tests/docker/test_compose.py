"""compose.yaml: valid for both profiles, GPU reservations and health checks where they belong, no keys in it;
and brought up for real on CPU: the policy server answers a chat completion, the calculator computes over MCP."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from support_docker import COMPOSE_FILE, compose_cli, compose_json, unavailable

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
    # the CPU model server shares the cores the way the harness's own servers do (harness.serving.cores)
    assert cpu["policy-server-cpu"]["environment"]["OMP_WAIT_POLICY"] == "PASSIVE"


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
# The README's `docker compose --profile cpu up --wait policy-server-cpu calculator` runs for real in
# tests/docker/test_readme_compose.py: both services healthy, a chat request answered, a calculator from
# `compose run` answering an MCP client, and nothing left after `down`.
# The CPU profile's τ² smoke evaluation in a container (policy and user simulator served inside it, τ²'s evaluator
# scoring, a row in the mounted results folder) runs as the README's command: tests/docker/test_readme_compose.py.
