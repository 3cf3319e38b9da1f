"""The GPU image, tested inside on a CPU machine: the locked set is what is installed, torch/vLLM/verl/Ray and the
harness import, every profile validates, the verl engine's CPU tests pass in it, compose's GPU services resolve
against it, and agent-lightning's absence is still forced by the proven verl.

The image is `make image-gpu` (scripts/build-images.sh gpu) at the current content tag; without it these tests
skip, unless HARNESS_REQUIRE_GPU_IMAGE=1 (CI sets it when it builds the image), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support_docker import COMPOSE_FILE, ROOT, compose_cli, engine_answers, image_exists, lock_versions

pytestmark = pytest.mark.docker

REQ = ROOT / "docker" / "requirements"
LOCK = REQ / "gpu.lock"
# What the H200 ran (docker/requirements/gpu-h200.txt + the machine's torch), printed from inside the image.
PROVEN = {"torch": "2.11.0", "vllm": "0.24.0", "verl": "0.9.1", "ray": "2.60.0", "transformers": "5.9.0"}
# `pip check` in the image: the declared bounds the H200 set does not meet (it was installed --no-deps there too,
# and gpu.in forces its pins with --overrides), and the dependencies gpu-excludes.txt leaves out. Nothing else.
EXCLUDED = {
    line.strip().lower() for line in (REQ / "gpu-excludes.txt").read_text().splitlines() if line.strip()[:1].isalnum()
}
UNMET_BOUNDS = {
    "agent-framework-core 1.23.0 has requirement msgspec<0.23,>=0.20.0, but you have msgspec 0.23.0.",
    "litellm 1.110.2 has requirement importlib-metadata<9.0,>=8.0.0, but you have importlib-metadata 10.2.0.",
}


def pip_check_known(line: str) -> bool:
    m = re.match(r"^\S+ \S+ requires (\S+), which is not installed\.$", line)
    return (m is not None and m.group(1).lower() in EXCLUDED) or line in UNMET_BOUNDS


def _tag() -> str:
    out = subprocess.run(
        [str(ROOT / "scripts" / "build-images.sh"), "--tags-only", "gpu"], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[-1]


@pytest.fixture(scope="module")
def image() -> str:
    def missing(reason: str) -> None:
        if os.environ.get("HARNESS_REQUIRE_GPU_IMAGE") == "1":
            pytest.fail(f"HARNESS_REQUIRE_GPU_IMAGE=1 but {reason}")
        pytest.skip(reason)

    if not engine_answers():
        missing("no Docker engine answers (scripts/docker-setup.sh starts one)")
    tag = _tag()
    if not image_exists(tag):
        missing(f"{tag} is not built (make image-gpu)")
    return tag


def run_in(image: str, *args: str, mounts: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout=600):
    cmd = ["docker", "run", "--rm", "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
    for m in mounts:
        cmd += ["-v", m]
    for k, v in (env or {}).items():
        cmd += ["-e", f"{k}={v}"]
    proc = subprocess.run([*cmd, image, *args], capture_output=True, text=True, timeout=timeout)
    print(f"$ docker run ... {image} {' '.join(args)[:300]}\n{proc.stdout[-6000:]}{proc.stderr[-3000:]}")
    return proc


VERSIONS = """
import importlib.metadata as m, json, torch, vllm, verl, ray, transformers
import harness.cli, harness.engines.verl.engine, harness.engines.verl.agent_loop, harness.engines.verl.rollout
import vllm.entrypoints.openai.api_server, verl.trainer.main_ppo  # what the policy server and the trainer start
names = ["torch", "vllm", "verl", "ray", "transformers", "agent-framework-core", "mcp", "agent-rl-harness"]
out = {n: m.version(n) for n in names}
out["torch.version.cuda"] = torch.version.cuda
out["python"] = __import__("platform").python_version()
print(json.dumps(out))
"""


def test_versions_inside_the_image_are_the_h200_set(image: str) -> None:
    proc = run_in(image, "python", "-c", VERSIONS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, version in PROVEN.items():
        assert got[name] == version, (name, got[name])
    assert got["torch.version.cuda"] == "13.0"
    assert got["python"].startswith("3.11.")


def test_installed_set_is_the_lock(image: str) -> None:
    """The environment holds exactly gpu.lock's pins (plus the harness and the venv's pip); `pip check` reports
    only the known unmet bounds of the H200 set."""
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    proc = run_in(image, "python", "-c", code)
    assert proc.returncode == 0, proc.stderr
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(proc.stdout).items()}
    locked = lock_versions(LOCK)
    extra = {k: v for k, v in installed.items() if k not in locked and k not in ("agent-rl-harness", "pip")}
    missing = {k: v for k, v in locked.items() if installed.get(k) != v}
    assert not extra and not missing, f"not in gpu.lock: {extra}; not installed as locked: {missing}"
    check = run_in(image, "python", "-m", "pip", "check")
    unexpected = [line for line in check.stdout.splitlines() if line.strip() and not pip_check_known(line)]
    assert not unexpected, unexpected
    overlays = run_in(
        image, "sh", "-c", "cat /opt/harness/locks/gpu.lock | sha256sum; ls /opt/site/calculator /opt/site/convert"
    )
    assert overlays.stdout.split()[0] == __import__("hashlib").sha256(LOCK.read_bytes()).hexdigest()


MISSING_EXTRAS = """
import importlib.metadata as m
from packaging.markers import default_environment
from packaging.requirements import Requirement
norm = lambda n: n.lower().replace("_", "-").replace(".", "-")
installed = {norm(d.metadata["Name"]): d for d in m.distributions()}
env = default_environment()
for name, dist in sorted(installed.items()):
    for req in map(Requirement, dist.requires or []):
        if not req.extras or (req.marker and not req.marker.evaluate(dict(env, extra=""))):
            continue
        dep = installed.get(norm(req.name))
        for extra in req.extras if dep else ():
            for sub in map(Requirement, dep.requires or []):
                wanted = sub.marker and sub.marker.evaluate(dict(env, extra=extra))
                if wanted and not sub.marker.evaluate(dict(env, extra="")) and norm(sub.name) not in installed:
                    print(f"{name} -> {req.name}[{extra}] -> {sub.name}")
"""


def test_every_requested_extra_is_installed(image: str) -> None:
    """`pip check` ignores extras: a package asking for `uvicorn[standard]` gets no uvloop unless the lock has it
    (the forced H200 pins carry no extras). Only gpu-excludes.txt's packages may be missing."""
    proc = run_in(image, "python", "-c", MISSING_EXTRAS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    missing = [line for line in proc.stdout.splitlines() if line.split(" -> ")[-1].lower() not in EXCLUDED]
    assert not missing, missing


@pytest.mark.parametrize("benchmark", ["math", "tau2"])
def test_every_profile_validates_inside(image: str, benchmark: str) -> None:
    """`harness validate` imports the benchmark's code (τ²'s packages are in the set) and checks each profile."""
    proc = run_in(image, "harness", "validate", benchmark)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ok ")]
    assert lines and any("engine=verl" in line for line in lines)


VERL_CHECK = """
import json, pathlib
from harness.engines.verl.compose import check, compose
from harness.engines.verl.engine import VerlConfig, verl_run_config
from harness.errors import EngineError
from harness.spec import load_spec, profile_names
places = dict(model_path="/model", train_file="/t.parquet", output_dir=pathlib.Path("/run/train"),
              agent_loop_config="/loops.yaml", seed=0, ray_address=None)
out = {}
for spec_file in sorted(pathlib.Path("/opt/harness/benchmarks").glob("*/spec.yaml")):
    for profile in profile_names(spec_file):
        spec = load_spec(spec_file, profile)
        if spec.training is None or spec.training.engine != "verl":
            continue
        config = VerlConfig.model_validate(spec.training.config)
        run = verl_run_config(config, val_file=spec.training.validation_split and "/v.parquet", **places)
        try:
            check(compose(run))
            out[f"{spec.name}/{profile}"] = "ok"
        except EngineError as err:
            out[f"{spec.name}/{profile}"] = str(err)
# VERL's own default estimator (GAE) trains a critic the harness gives no model: refused, not started.
del run["algorithm"]
try:
    check(compose(run))
    out["without algorithm"] = "ok"
except EngineError as err:
    out["without algorithm"] = str(err)
print(json.dumps(out))
"""


def test_every_verl_profile_passes_verls_own_check_inside(image: str) -> None:
    """Each verl profile of every benchmark, composed over VERL's own ``ppo_trainer`` defaults as the worker does,
    passes VERL's own config check (what ``main_ppo`` runs before Ray starts) without a GPU; a run config that
    leaves the estimator to VERL's default (GAE) is refused for its critic."""
    proc = run_in(image, "python", "-c", VERL_CHECK)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])
    refused = verdicts.pop("without algorithm")
    assert "VERL would train a critic (algorithm.adv_estimator=gae" in refused, refused
    assert {"math/tuned-h200", "tau2/h200", "bfcl/learn-h200", "bfcl/smoke-verl"} <= set(verdicts)
    assert {k: v for k, v in verdicts.items() if v != "ok"} == {}


def _pytest_wheels(tmp: Path) -> Path:
    """pytest for the image's Python (pure-Python wheels, the versions of locks/harness.txt)."""
    pins = lock_versions(ROOT / "locks" / "harness.txt")
    wanted = [f"{n}=={pins[n]}" for n in ("pytest", "pluggy", "iniconfig", "pytest-timeout", "packaging")]
    wheels = tmp / "pytest-wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheels), *wanted],
        check=True,
        timeout=300,
    )
    return wheels


def test_verl_engine_cpu_tests_pass_inside(image: str, tmp_path: Path) -> None:
    """tests/test_verl_engine.py (spec translation, Ray by address, token tracing) with the image's verl/Ray/
    transformers; the smoke model is converted inside the image (TRL from HARNESS_CONVERT_PATH)."""
    wheels = _pytest_wheels(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    script = (
        "set -e; pip install -q --no-deps --no-index --target /tmp/pytest-site /wheels/*.whl; "
        "cd /opt/harness && PYTHONPATH=/tmp/pytest-site python -m pytest -p no:cacheprovider -q -m '' "
        "--rootdir /opt/harness -c /opt/harness/pyproject.toml /opt/harness/tests/test_verl_engine.py"
    )
    proc = run_in(
        image,
        "sh",
        "-c",
        script,
        mounts=(
            f"{ROOT / 'tests'}:/opt/harness/tests:ro",
            f"{wheels}:/wheels:ro",
            f"{cache}:/opt/harness/.cache",
        ),
        env={"PYTHONDONTWRITEBYTECODE": "1"},
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary and "skipped" not in summary, summary


VLLM_OPTIONS = """
import dataclasses, json
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.openai import cli_args
from vllm.tool_parsers import ToolParserManager
frontend = [c for c in vars(cli_args).values() if isinstance(c, type) and c.__name__.endswith("Args")]
classes = [AsyncEngineArgs, *frontend]
names = sorted({f.name for c in classes if dataclasses.is_dataclass(c) for f in dataclasses.fields(c)})
print(json.dumps([names, sorted(ToolParserManager.list_registered())]))
"""


def test_compose_gpu_services_resolve_against_the_image(image: str) -> None:
    """`docker compose --profile gpu config`: every GPU service runs harness-gpu, its entrypoint and command exist
    in the image, and every flag the vLLM servers are given is one this vLLM accepts."""
    cli = compose_cli()
    assert cli, "Docker Compose v2 is not installed"
    env = dict(os.environ, HARNESS_GPU_IMAGE=image)
    out = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "--profile", "gpu", "config", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    services = json.loads(out.stdout)["services"]
    gpu = {name: s for name, s in services.items() if name != "calculator"}
    assert gpu and all(s["image"] == image for s in gpu.values()), {n: s["image"] for n, s in gpu.items()}
    # vLLM's --help needs a GPU (it infers the device first): read its argument dataclasses instead.
    proc = run_in(image, "python", "-c", VLLM_OPTIONS, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    options, parsers = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, svc in gpu.items():
        argv = list(svc.get("command") or [])
        exe = (svc.get("entrypoint") or argv)[0]
        found = run_in(image, "sh", "-c", f"command -v {exe} && command -v {argv[0]}")
        assert found.returncode == 0, f"{name}: {exe} / {argv[0]} not in the image"
        if "vllm.entrypoints.openai.api_server" in argv:
            for arg in (a for a in argv if a.startswith("--")):
                flag, _, value = arg[2:].partition("=")
                assert flag.replace("-", "_") in options, f"{name}: vLLM {PROVEN['vllm']} has no --{flag}"
                if flag == "tool-call-parser":
                    assert value in parsers, f"{name}: vLLM {PROVEN['vllm']} has no tool parser {value}"
        elif argv[0] == "harness":
            helped = run_in(image, *argv[:3], "--help")
            assert helped.returncode == 0
            for flag in (a for a in argv[3:] if a.startswith("--")):
                assert flag in helped.stdout, f"{name}: `{' '.join(argv[:3])}` has no {flag}"


AGENT_LIGHTNING_NEEDS = """
import importlib, json
out = {}
for mod, name in [("verl.trainer.main_ppo", "create_rl_sampler"), ("verl.trainer.main_ppo", "TaskRunner"),
                  ("verl.workers.fsdp_workers", None), ("verl.experimental.agent_loop", "AgentLoopManager")]:
    try:
        m = importlib.import_module(mod)
        out[f"{mod}:{name}"] = "ok" if name is None or hasattr(m, name) else "missing"
    except Exception as e:
        out[f"{mod}:{name}"] = type(e).__name__
import verl.experimental.agent_loop as al
out["AgentLoopManager.wake_up"] = "ok" if hasattr(al.AgentLoopManager, "wake_up") else "missing"
print(json.dumps(out))
"""


def test_agent_lightning_cannot_train_with_the_proven_verl(image: str) -> None:
    """What agent-lightning's verl trainers import (0.3.0: create_rl_sampler, fsdp_workers, AgentLoopManager.wake_up;
    1.0.x: main_ppo.TaskRunner, create_rl_sampler) is gone from verl 0.9.1 (docker/README.md). When this fails,
    verl brought them back and agent-lightning's place should be decided again."""
    proc = run_in(image, "python", "-c", AGENT_LIGHTNING_NEEDS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["verl.trainer.main_ppo:create_rl_sampler"] == "missing"
    assert got["verl.trainer.main_ppo:TaskRunner"] == "missing"
    assert got["verl.workers.fsdp_workers:None"] == "ModuleNotFoundError"
    assert got["AgentLoopManager.wake_up"] == "missing"


VERL_NATIVE_ARM = """
import asyncio, json, sys
from pathlib import Path
sys.path.insert(0, "/opt/harness/bench")
import hydra, pandas as pd, verl.trainer.main_ppo as main_ppo
from omegaconf import OmegaConf
from verl.trainer.main_ppo import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl.tools.tool_registry import load_all_tools
import verl_speed as vs
from harness.spec import load_spec

out = Path("/tmp/out")
spec_path = "/opt/harness/benchmarks/math/spec.yaml"
spec = load_spec(Path(spec_path), "speed-h200")
harness, train_file = vs.harness_config("speed-h200", 0, "/model", out / "train")
n = len(pd.read_parquet(train_file))
rows = vs.native_rows(train_file, spec.agent.instructions)
(out / "native").mkdir()
pd.DataFrame(rows).to_parquet(out / "native" / "train.parquet")
native = vs.native_config(harness, out, spec.agent.max_turns)
with hydra.initialize_config_dir(config_dir=str(Path(main_ppo.__file__).parent / "config"), version_base=None):
    base = hydra.compose(config_name="ppo_trainer")
OmegaConf.set_struct(base, False)
cfg = OmegaConf.merge(base, OmegaConf.create(native))
validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
tools = load_all_tools(rollout.multi_turn.tool_config_path, rollout.multi_turn.function_tool_path)
calc = {t.name: t for t in tools}["calculate"]
reward = vs.NATIVE / "reward.py"
import importlib.util
spec_r = importlib.util.spec_from_file_location("r", reward); r = importlib.util.module_from_spec(spec_r)
spec_r.loader.exec_module(r)
print(json.dumps({
    "n": n, "rows": len(rows), "agent": cfg.actor_rollout_ref.rollout.agent.default_agent_loop,
    "multi_turn": [rollout.multi_turn.enable, rollout.multi_turn.format, rollout.multi_turn.max_assistant_turns],
    "same": [cfg.data.train_batch_size, rollout.n, cfg.data.max_response_length, cfg.trainer.total_epochs,
             cfg.actor_rollout_ref.actor.optim.lr, cfg.trainer.val_before_train],
    "schema": calc.tool_schema.model_dump(exclude_none=True)["function"]["name"],
    "calc": [asyncio.run(calc.call({"expression": e})) for e in ("12*7+3", "1/0", "9**9**9")],
    "prompt": rows[0]["prompt"][0]["content"][:30],
    "score": [r.compute_score("math", "<tool_response>12</tool_response>### 12", "12"),
              r.compute_score("math", "### 12 <tool_response>5</tool_response> ### 5", "12")],
}))
"""


def test_verl_speed_native_arm_is_accepted_by_verl(image: str) -> None:
    """bench/verl_speed.py's verl arm, as far as a CPU goes: built from the harness arm's configuration (speed-h200),
    it passes verl's own config validation with verl's tool_agent loop and hermes parser, the function tool loads
    and answers through the calculator's environment (errors and the CPU limit as text), and the reward scores
    the final turn only."""
    proc = run_in(
        image,
        "python",
        "-c",
        VERL_NATIVE_ARM,
        mounts=(f"{ROOT / 'bench'}:/opt/harness/bench:ro", f"{ROOT / 'benchmarks'}:/opt/harness/benchmarks:ro"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["n"] == got["rows"] == 64
    assert got["agent"] == "tool_agent"
    assert got["multi_turn"] == [True, "hermes", 5]
    assert got["same"] == [8, 8, 1024, 1, 5e-6, False]
    assert got["schema"] == "calculate"
    assert got["calc"][0] == "87"
    assert got["calc"][1] == "Error executing tool calculate: ZeroDivisionError: division by zero"
    assert got["calc"][2].endswith("exceeded its limits (2 s CPU)")
    assert got["prompt"].startswith("Solve the following math")
    assert got["score"] == [1.0, 0.0]
