"""Helpers shared by the Docker tests: a small Dockerfile parser, engine/image checks, compose invocation."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "docker"
COMPOSE_FILE = ROOT / "compose.yaml"
BUILD_SCRIPT = ROOT / "scripts" / "build-images.sh"
IMAGES = ("calculator", "cpu", "gpu")

INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG",
    "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER",
}  # fmt: skip


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Dockerfile:
    path: Path
    global_args: dict[str, str | None]
    stages: list[Stage]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for s in self.stages for i in s.instructions if i.keyword == keyword]


def parse_dockerfile(path: Path) -> Dockerfile:
    """Parse a Dockerfile (line continuations, comments, parser directives) into stages; raise on anything odd."""
    logical: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):  # comment lines inside a continued instruction are dropped
            continue
        if not buf:
            start = n
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        buf += raw
        logical.append((start, " ".join(buf.split())))
        buf = ""
    if buf:
        raise ValueError(f"{path}: the last instruction ends with a line continuation")
    global_args: dict[str, str | None] = {}
    stages: list[Stage] = []
    for line, text in logical:
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword not in INSTRUCTIONS:
            raise ValueError(f"{path}:{line}: unknown instruction {keyword!r}")
        if not args.strip():
            raise ValueError(f"{path}:{line}: {keyword} without arguments")
        if keyword == "FROM":
            parts = args.split()
            parts = [p for p in parts if not p.startswith("--platform")]
            if len(parts) == 3 and parts[1].upper() == "AS":
                stages.append(Stage(parts[0], parts[2]))
            elif len(parts) == 1:
                stages.append(Stage(parts[0], None))
            else:
                raise ValueError(f"{path}:{line}: malformed FROM {args!r}")
        elif not stages:
            if keyword != "ARG":
                raise ValueError(f"{path}:{line}: only ARG may come before the first FROM")
            name, eq, value = args.partition("=")
            global_args[name.strip()] = value.strip().strip('"') if eq else None
        else:
            stages[-1].instructions.append(Instruction(keyword, args, line))
    if not stages:
        raise ValueError(f"{path}: no FROM")
    return Dockerfile(path, global_args, stages)


def dockerfile(image: str) -> Dockerfile:
    return parse_dockerfile(DOCKER_DIR / f"Dockerfile.{image}")


def lock_versions(path: Path) -> dict[str, str]:
    """name (normalised) -> version of every ``name==version`` line of a requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


# --- engine, images, compose ----------------------------------------------------------------------------------------


def compose_cli() -> list[str] | None:
    """The compose command (`docker compose`, else `docker-compose` v2), or None."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        out = subprocess.run([legacy, "version", "--short"], capture_output=True, text=True).stdout.strip()
        if out.startswith("2"):
            return [legacy]
    return None


def engine_answers(tries: int = 3) -> bool:
    """Whether the engine answers ``docker version`` (a cheap call), asked up to ``tries`` times.

    A busy engine (other tests building images or starting containers) can be slow to answer once; a single
    probe then disagrees with the harness's own probe a moment later.
    """
    docker = shutil.which("docker")
    if docker is None:
        return False
    for attempt in range(tries):
        try:
            if subprocess.run([docker, "version"], capture_output=True, timeout=30).returncode == 0:
                return True
        except subprocess.TimeoutExpired:
            pass
        if attempt + 1 < tries:
            time.sleep(2)
    return False


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def unavailable(reason: str) -> None:
    """Skip with ``reason``; fail instead where HARNESS_REQUIRE_DOCKER=1 (CI sets it, so nothing skips there)."""
    if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
        pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


def require_engine_and_images(*refs: str) -> None:
    """Skip (with the reason) when no engine answers or an image is missing; CI provides both. A default ``:latest``
    CPU or calculator image stands for the one a run of this checkout uses (its content tag): a ``:latest`` left by
    an older build is not enough, since the harness refuses images built from other code."""
    from harness.backends.images import DEFAULT_CALCULATOR_IMAGE, DEFAULT_CPU_IMAGE, image_refs

    if not engine_answers():
        unavailable("no Docker engine answers (scripts/docker-setup.sh starts one)")
    used = dict(zip((DEFAULT_CPU_IMAGE, DEFAULT_CALCULATOR_IMAGE), image_refs(), strict=True))
    missing = [used.get(r, r) for r in refs if not image_exists(used.get(r, r))]
    if missing:
        unavailable(f"docker image(s) missing: {', '.join(missing)} (scripts/build-images.sh cpu calculator)")


def containers_with_label(label: str) -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label={label}", "--format", "{{.ID}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def compose_json(cli: list[str], *args: str, env: dict[str, str] | None = None) -> dict:
    proc = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), *args, "config", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
