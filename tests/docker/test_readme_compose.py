"""Every `docker compose` command of the top-level README and the pages in docs/, run as written in a fresh clone's
layout after `make images` and `make bench-math`: no POLICY_MODEL_PATH, no HARNESS_*_DIR, no HARNESS_UID,
no data mirror.

The clone holds the repository's tracked files (`git ls-files`, with the working tree's content) and what
`make bench-math` leaves in `.cache/` (the converted model, hard-linked from the shared cache, and the dataset,
both put there by `harness prepare math`, which also links `.cache/models/policy`); no `artifacts/`. The CPU
commands run for real; each GPU command runs as its CPU counterpart (same command, `-cpu` service), and its GPU
service must resolve (`config`). Knobs the commands read from the environment (ports, TAU2_LIMIT) are set so that
the test does not clash with other servers and stays within minutes; the commands themselves are unchanged.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from support_docker import ROOT, compose_cli, require_engine_and_images

pytestmark = [pytest.mark.docker, pytest.mark.slow]

README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
# GPU services -> the CPU service the same command runs on this machine (None: no CPU counterpart; config only).
CPU_COUNTERPART = {"math-train": "math-train-cpu", "math-eval": "math-eval-cpu", "tau2-eval": "tau2-eval-cpu",
                   "tau2-train": None}  # fmt: skip
# Long jobs that other tests already run on CPU end to end (make bench-math = math-train-cpu's plan).
NOT_RERUN = {"math-train-cpu": ["harness", "run", "math", "--profile", "smoke", "--backend", "local"]}


def readme_compose_commands() -> list[list[str]]:
    """The `docker compose ...` lines of the code blocks of README.md and docs/ (comments dropped), each once."""
    out: list[list[str]] = []
    for page in PAGES:
        in_block = False
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                in_block = not in_block
                continue
            if in_block and line.strip().startswith("docker compose "):
                cmd = shlex.split(line.split("#", 1)[0])
                if cmd not in out:
                    out.append(cmd)
    return out


def test_readme_names_compose_commands() -> None:
    cmds = readme_compose_commands()
    services = {word for c in cmds for word in c[2:]}
    assert {"policy-server-cpu", "calculator", "math-eval-cpu", "tau2-eval-cpu", "math-train"} <= services, cmds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory, smoke_model: Path) -> Path:
    """A fresh clone's files plus the state `make bench-math` leaves in `.cache/`."""
    require_engine_and_images("harness-cpu:latest", "harness-calculator:latest")
    root = tmp_path_factory.mktemp("clone") / "agent-rl-harness"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src = ROOT / name
        if src.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    models = root / ".cache" / "models"
    models.mkdir(parents=True)
    shutil.copytree(smoke_model, models / smoke_model.name, copy_function=os.link)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")}
    env.update(HARNESS_CACHE=str(root / ".cache"))
    prep = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "harness"), "prepare", "math"], env=env, capture_output=True, text=True
    )
    assert prep.returncode == 0, prep.stdout + prep.stderr
    assert (models / "policy").is_symlink() and (models / "policy" / "config.json").is_file(), prep.stdout
    assert not (root / "artifacts").exists()
    return root


def user_env(port: int, project: str) -> dict[str, str]:
    """A user's environment: none of the compose settings set, except a free port and a project name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "POLICY_", "USER_", "TAU2_", "MATH_"))}
    env.update(POLICY_PORT=str(port), COMPOSE_PROJECT_NAME=project, TAU2_LIMIT="1")
    return env


def compose(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess[str]:
    cli = compose_cli()
    assert cli, "Docker Compose v2 is not installed"
    proc = subprocess.run([*cli, *cmd[2:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"$ {shlex.join(cmd)}  (rc {proc.returncode})\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc


def down(cwd: Path, env: dict[str, str]) -> None:
    cli = compose_cli() or []
    for profile in ("cpu", "gpu"):
        subprocess.run([*cli, "--profile", profile, "down", "-v", "--remove-orphans", "--timeout", "10"], cwd=cwd,
                       env=env, capture_output=True, timeout=300)  # fmt: skip


def on_cpu(cmd: list[str]) -> list[str]:
    """The same command on the CPU profile (a GPU service replaced by its CPU counterpart)."""
    out = list(cmd)
    if "--profile" in out and out[out.index("--profile") + 1] == "gpu":
        out[out.index("--profile") + 1] = "cpu"
        out[-1] = CPU_COUNTERPART[out[-1]] or out[-1]
    return out


@pytest.mark.parametrize("cmd", readme_compose_commands(), ids=lambda c: " ".join(c[2:]))
def test_readme_compose_command(cmd: list[str], clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = f"readme-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    env = user_env(port, project)
    if "gpu" in cmd:  # the GPU service resolves against the GPU image; it runs below as its CPU counterpart
        cli = compose_cli() or []
        config = subprocess.run([*cli, "--profile", "gpu", "config", "--format", "json"], cwd=clone, env=env,
                                capture_output=True, text=True)  # fmt: skip
        assert config.returncode == 0, config.stderr
        assert json.loads(config.stdout)["services"][cmd[-1]]["image"] == "harness-gpu:latest"
        if CPU_COUNTERPART[cmd[-1]] is None or on_cpu(cmd) in readme_compose_commands():
            return  # no CPU counterpart, or the README's own CPU command runs it
    cmd = on_cpu(cmd)
    if cmd[-1] in NOT_RERUN:
        # not run again here: its command is make bench-math's, which test_e2e_math and the docker backend's run test
        # run end to end; what is checked is that the service resolves to exactly that command
        cli = compose_cli() or []
        config = subprocess.run([*cli, "--profile", "cpu", "config", "--format", "json"], cwd=clone, env=env,
                                capture_output=True, text=True)  # fmt: skip
        assert config.returncode == 0, config.stderr
        assert json.loads(config.stdout)["services"][cmd[-1]]["command"] == NOT_RERUN[cmd[-1]]
        return
    try:
        if cmd[2:4] == ["--profile", "cpu"] and "up" in cmd:
            proc = compose(cmd, clone, env, timeout=900)
            assert proc.returncode == 0
            models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
            assert [m["id"] for m in models["data"]] == ["policy"]
            ps = compose(["docker", "compose", "--profile", "cpu", "ps", "--format", "json"], clone, env, 60)
            rows = [json.loads(line) for line in ps.stdout.splitlines() if line.strip()]
            rows = rows[0] if rows and isinstance(rows[0], list) else rows
            health = {r["Service"]: r["Health"] for r in rows}
            assert health == {"policy-server-cpu": "healthy", "calculator": "healthy"}
            # the policy answers a chat request from the host ...
            reply = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "policy", "messages": [{"role": "user", "content": "What is 2+3?"}], "max_tokens": 16},
                timeout=120,
            )
            assert reply.status_code == 200, reply.text
            assert reply.json()["usage"]["completion_tokens"] > 0
            # ... and a calculator from `compose run` answers an MCP client (as the harness's agent calls it)
            from harness.tools.calculator import Calculator, calculate, open_calculator
            from harness.tools.servers import command_env

            cli = compose_cli() or []
            run = [*cli, "--project-directory", str(clone), "-p", project, "--profile", "cpu", "run", "--rm", "-T"]
            monkeypatch.setenv(command_env(Calculator), json.dumps([*run, "calculator"]))

            async def compute() -> list[str]:
                async with open_calculator() as tool:
                    return [await calculate(tool, "6*7"), await calculate(tool, "2**10 - 24")]

            assert asyncio.run(compute()) == ["42", "1000"]
        else:
            before = _rows(clone, cmd[-1])
            proc = compose(cmd, clone, env, timeout=1800)
            assert proc.returncode == 0
            rows = _rows(clone, cmd[-1])[len(before) :]
            assert len(rows) == 1 and rows[0]["status"] == "complete", rows
            assert rows[0]["engine"] == "none", "an *-eval service must evaluate only"
            assert rows[0]["pass_before"] == "" and rows[0]["pass_after"] != ""
            if cmd[-1] == "tau2-eval-cpu":  # τ²'s own evaluator and native results, the simulator served inside
                assert rows[0]["n_tasks"] == "1" and rows[0]["samples_per_task"] == "2"
                manifest = json.loads(
                    (clone / "results" / "tau2" / "manifests" / f"{rows[0]['run_id']}.json").read_text()
                )
                assert manifest["user_simulator"]["source"] == "served"
                assert set(manifest["phases"]["after"]["pass_hat_k"]) == {"1", "2"}
                native = clone / "artifacts" / "runs" / rows[0]["run_id"] / "native-results-after.json"
                from tau2.data_model.simulation import Results

                assert len(Results.load(native).simulations) + int(rows[0]["infra_errors_after"]) == 2
            owner = (clone / "results").stat().st_uid
            assert all(p.stat().st_uid == owner for p in (clone / "artifacts").rglob("*")), "files not the user's"
    finally:
        down(clone, env)
    assert not subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
                              capture_output=True, text=True).stdout.split()  # fmt: skip


def _rows(clone: Path, service: str) -> list[dict[str, str]]:
    bench = re.match(r"(math|tau2)", service)
    assert bench, service
    path = clone / "results" / bench.group(1) / "runs.csv"
    return list(csv.DictReader(path.open())) if path.exists() else []


def test_missing_model_is_named(clone: Path, tmp_path: Path) -> None:
    """A folder without a checkpoint stops the policy server at once with a message naming POLICY_MODEL_PATH; a
    path that does not exist is refused by compose, naming the path (nothing is created)."""
    project = f"readme-{uuid.uuid4().hex[:8]}"
    env = user_env(_free_port(), project)
    empty = tmp_path / "empty-model"
    empty.mkdir()
    try:
        proc = compose(["docker", "compose", "--profile", "cpu", "up", "--wait", "policy-server-cpu"], clone,
                       dict(env, POLICY_MODEL_PATH=str(empty)), timeout=300)  # fmt: skip
        assert proc.returncode != 0
        logs = compose(["docker", "compose", "--profile", "cpu", "logs", "policy-server-cpu"], clone, env, 60)
        assert f"POLICY_MODEL_PATH={empty}" in logs.stdout + logs.stderr
        missing = tmp_path / "no-such-model"
        proc = compose(["docker", "compose", "--profile", "cpu", "up", "--wait", "policy-server-cpu"], clone,
                       dict(env, POLICY_MODEL_PATH=str(missing)), timeout=300)  # fmt: skip
        assert proc.returncode != 0 and str(missing) in proc.stderr
        assert not missing.exists()
    finally:
        down(clone, env)
