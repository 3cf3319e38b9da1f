"""The Docker backend: processes in containers behave as local ones do, and nothing is left behind.

The quick tests run a Python one-liner in the calculator image (it has an interpreter and nothing else); the slow
ones run the math smoke plan through `harness run math --backend docker`, and interrupt one.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.tools.calculator import Calculator
from support import REPO, copy_math_benchmark
from support_docker import containers_with_label, require_engine_and_images

pytestmark = pytest.mark.docker

CPU_IMAGE = "harness-cpu:latest"
CALCULATOR_IMAGE = "harness-calculator:latest"


@pytest.fixture
def calc_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A DockerBackend whose 'CPU image' is the calculator image (python at /opt/venvs/calculator)."""
    require_engine_and_images(CALCULATOR_IMAGE)
    from harness.backends.docker import DockerBackend

    monkeypatch.setenv("HARNESS_CPU_IMAGE", CALCULATOR_IMAGE)
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    run_id = f"test-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    backend = DockerBackend(run_id=run_id)
    yield backend
    backend.close()
    assert containers_with_label(f"harness.run_id={run_id}") == []


def _spec(tmp_path: Path, code: str, *args: str, **kw):
    from harness.backends.base import LaunchSpec

    return LaunchSpec(
        role=kw.pop("role", "train"),
        env_name="calculator",
        argv=["-c", code, *args],
        env=kw.pop("env", {}),
        log_path=tmp_path / "logs" / "proc.log",
        **kw,
    )


def test_launch_streams_lines_mounts_and_filters_env(calc_backend, tmp_path: Path) -> None:
    out = tmp_path / "artifacts" / "out"
    code = (
        "import os, sys\n"
        "for i in range(3): print('step', i, flush=True)\n"
        "open(sys.argv[1] + '/owner.txt', 'w').write(f'{os.getuid()}:{os.getgid()}')\n"
        "names = ('OPENAI_API_KEY', 'HF_TOKEN', 'FOO', 'TOKENIZERS_PARALLELISM', 'HARNESS_TOOL_CALCULATOR_CMD')\n"
        "print('env', sorted(k for k in os.environ if k in names), flush=True)\n"
        "print('home', os.environ['HOME'], os.environ['HARNESS_ARTIFACTS'])\n"
    )
    env = {
        "OPENAI_API_KEY": "sk-not-real",
        "HF_TOKEN": "hf_not_real",
        "FOO": "bar",
        "TOKENIZERS_PARALLELISM": "false",
        "HARNESS_TOOL_CALCULATOR_CMD": '["docker"]',
        "PATH": "/nowhere",
    }
    handle = calc_backend.launch(_spec(tmp_path, code, str(out), env=env, mounts=(out,), capture_stdout=True))
    lines = list(handle.lines())
    assert handle.wait(timeout=60) == 0
    handle.stop()
    assert [ln.strip() for ln in lines[:3]] == ["step 0", "step 1", "step 2"]
    assert "env ['FOO', 'TOKENIZERS_PARALLELISM']" in lines[3]
    assert lines[4].split() == ["home", "/tmp", str((tmp_path / "artifacts").absolute())]
    assert (out / "owner.txt").read_text() == f"{os.getuid()}:{os.getgid()}"
    assert "step 2" in (tmp_path / "logs" / "proc.log").read_text()


def test_stop_terminates_and_removes(calc_backend, tmp_path: Path) -> None:
    code = "import time; print('up', flush=True); time.sleep(600)"
    handle = calc_backend.launch(_spec(tmp_path, code, role="server"))
    container = handle.container
    deadline = time.monotonic() + 30
    while "up" not in (tmp_path / "logs" / "proc.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert handle.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        handle.wait(timeout=1)
    assert container.labels["harness.role"] == "server"
    assert container.labels["harness.run_id"] == calc_backend.run_id
    started = time.monotonic()
    handle.stop(grace_s=10)
    assert time.monotonic() - started < 10  # SIGTERM reaches the process (an init runs as PID 1)
    assert handle.poll() not in (None, 0)
    handle.stop()  # idempotent
    assert containers_with_label(f"harness.run_id={calc_backend.run_id}") == []


def test_exit_code_and_describe(calc_backend, tmp_path: Path) -> None:
    handle = calc_backend.launch(_spec(tmp_path, "import sys; sys.exit(3)"))
    assert handle.wait(timeout=60) == 3
    assert handle.poll() == 3
    handle.stop()
    info = calc_backend.describe()
    assert info.name == "docker"
    for role in ("cpu", "calculator"):
        assert info.images[role].id.startswith("sha256:")
        assert info.images[role].digest
    cmd = calc_backend.tool_command(Calculator)
    assert cmd[:4] == ["docker", "run", "-i", "--rm"]
    assert cmd[cmd.index("--network") + 1] == "none"
    assert f"harness.run_id={calc_backend.run_id}" in cmd


def test_close_removes_calculator_containers(calc_backend) -> None:
    """A calculator started from tool_command(Calculator) (as the agent's MCP client does) is removed by close()."""
    cmd = calc_backend.tool_command(Calculator)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not containers_with_label(f"harness.run_id={calc_backend.run_id}") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert containers_with_label(f"harness.run_id={calc_backend.run_id}")
        calc_backend.close()
        assert containers_with_label(f"harness.run_id={calc_backend.run_id}") == []
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_available_reports_missing_images(monkeypatch: pytest.MonkeyPatch) -> None:
    require_engine_and_images(CALCULATOR_IMAGE)
    from harness.backends.docker import DockerBackend

    monkeypatch.setenv("HARNESS_CPU_IMAGE", "harness-does-not-exist:nope")
    ok, reason = DockerBackend.available()
    assert not ok and "harness-does-not-exist:nope" in reason
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    ok, reason = DockerBackend.available()
    assert not ok and "Docker engine" in reason


def test_images_built_from_other_code_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default images are this checkout's content-derived tags: after a source change, until `make images`,
    auto selection says so and an explicit docker backend refuses in one line (never runs older code)."""
    require_engine_and_images(CALCULATOR_IMAGE)
    from harness.backends import docker as docker_backend
    from harness.backends import images
    from harness.errors import HarnessError

    tags = images.checkout_tags()
    assert tags is not None and all(re.fullmatch(r"harness-(cpu|calculator):[0-9a-f]{12}", t) for t in tags)
    monkeypatch.delenv("HARNESS_CPU_IMAGE", raising=False)
    monkeypatch.delenv("HARNESS_CALCULATOR_IMAGE", raising=False)
    monkeypatch.setattr(images, "checkout_tags", lambda: ("harness-cpu:000000000000", tags[1]))
    ok, reason = docker_backend.DockerBackend.available()
    assert not ok and reason == "docker image harness-cpu:000000000000 (this checkout's code) not built (make images)"
    with pytest.raises(HarnessError, match="this checkout's code"):
        docker_backend.DockerBackend()


# --- the math smoke plan through the CLI ------------------------------------------------------------------------------


def _run_env(tmp_path: Path) -> dict[str, str]:
    copy_math_benchmark(
        tmp_path / "benchmarks",
        {
            "evaluation": {"limit": 2, "max_tokens": 64},
            # one step on one prompt's group of two short completions: the backend, not learning, is under test
            "training": {
                "config": {"max_steps": 1, "prompts_per_step": 1, "num_generations": 2, "max_completion_length": 24}
            },
        },
    )
    return dict(
        os.environ,
        HARNESS_BENCHMARKS=str(tmp_path / "benchmarks"),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
    )


@pytest.mark.slow
def test_harness_run_math_smoke_in_docker(smoke_model: Path, tmp_path: Path) -> None:
    require_engine_and_images(CPU_IMAGE, CALCULATOR_IMAGE)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "math", "--backend", "docker"],
        capture_output=True,
        text=True,
        env=_run_env(tmp_path),
        cwd=REPO,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "results" / "math" / "runs.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "complete"
    assert row["backend"] == "docker"
    assert row["n_tasks"] == "2" and row["train_steps"] == "1"
    assert row["model_hash_before"] != row["model_hash_after"]
    assert "image:cpu=sha256:" in row["packages"] and "image:calculator=sha256:" in row["packages"], row["packages"]

    from harness.results.store.schema import INFRA_ERROR_KINDS
    from harness.results.store.store import ResultStore

    manifest = ResultStore(tmp_path / "results").manifest("math", row["run_id"])
    assert manifest.backend is not None and manifest.backend.name == "docker"
    images = manifest.backend.images
    for role in ("cpu", "calculator"):
        assert images[role].id.startswith("sha256:") and images[role].digest
    run_dir = tmp_path / "artifacts" / "runs" / row["run_id"]
    for name in ("server-before.log", "server-after.log", "train.log", "rollouts-after.jsonl"):
        assert (run_dir / name).exists(), name
    rollouts = [json.loads(line) for line in (run_dir / "rollouts-after.jsonl").read_text().splitlines()]
    assert not [r for r in rollouts if r.get("error_kind") in INFRA_ERROR_KINDS], rollouts
    assert containers_with_label(f"harness.run_id={row['run_id']}") == []


@pytest.mark.slow
def test_ctrl_c_removes_the_containers(smoke_model: Path, tmp_path: Path) -> None:
    require_engine_and_images(CPU_IMAGE, CALCULATOR_IMAGE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "math", "--backend", "docker"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_run_env(tmp_path),
        cwd=REPO,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    run_id = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if run_id is None:
                runs = tmp_path / "artifacts" / "runs"
                found = [p.name for p in runs.iterdir()] if runs.is_dir() else []
                run_id = found[0] if found else None
            if run_id and containers_with_label(f"harness.run_id={run_id}"):
                break
            time.sleep(0.5)
        assert run_id and containers_with_label(f"harness.run_id={run_id}"), "".join(output)[-3000:]
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=90)
        assert code == 130, "".join(output)[-3000:]
        deadline = time.monotonic() + 15
        while containers_with_label(f"harness.run_id={run_id}") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert containers_with_label(f"harness.run_id={run_id}") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if run_id:
            for cid in containers_with_label(f"harness.run_id={run_id}"):
                subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
