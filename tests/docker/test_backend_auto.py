"""`--backend auto`: Docker when an engine answers and this checkout's images exist, else local; the choice and its
reason are printed as one line.

The choice (``harness.cli._choose_backend``) is called with real inputs: a Docker socket that nobody answers, the
real engine with an image reference that does not exist, the real engine with the images. Then `harness run`
without ``--backend`` on this machine: what it picks must be what the engine and the image store say, and the run
must use it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness import cli
from harness.backends.images import checkout_tags
from harness.results.store.store import ResultStore
from support import REPO
from support_docker import engine_answers, image_exists, require_engine_and_images, unavailable


def _choose(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    capsys.readouterr()
    chosen = cli._choose_backend("auto")
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line, whatever the choice
    return chosen, out.strip()


def test_a_socket_nobody_answers_means_local_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a Docker socket file left behind by an engine that is gone: it exists, but connecting to it is refused
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(path))
    assert path.exists()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    chosen, line = _choose(capsys)
    assert chosen == "local"
    assert line == f"backend: local (no Docker engine answers at unix://{path} (connection refused))", line


def test_no_engine_at_all_is_one_short_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    chosen, line = _choose(capsys)
    assert (chosen, line) == ("local", "backend: local (no Docker engine answers at unix:///nonexistent/docker.sock "
                                       "(nothing listens there))")  # fmt: skip


@pytest.mark.docker
def test_an_engine_without_the_image_means_local_and_names_the_image(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not engine_answers():
        unavailable("no Docker engine answers (scripts/docker-setup.sh starts one)")
    missing = f"harness-cpu:missing-{uuid.uuid4().hex[:12]}"
    assert not image_exists(missing)
    monkeypatch.setenv("HARNESS_CPU_IMAGE", missing)
    chosen, line = _choose(capsys)
    assert chosen == "local"
    assert line == f"backend: local (docker image {missing} not found (build it: scripts/build-images.sh))"


@pytest.mark.docker
def test_an_engine_with_this_checkouts_images_means_docker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HARNESS_CPU_IMAGE", raising=False)
    monkeypatch.delenv("HARNESS_CALCULATOR_IMAGE", raising=False)
    tags = checkout_tags()
    assert tags is not None  # a checkout: its content-derived tags
    require_engine_and_images(*tags)
    chosen, line = _choose(capsys)
    assert (chosen, line) == ("docker", "backend: docker (engine and images available)")


@pytest.mark.slow
def test_harness_run_picks_what_this_machine_has_and_uses_it(smoke_model: Path, tmp_path: Path) -> None:
    """No ``--backend``: auto is the default. The expectation comes from the engine and the image store."""
    tags = checkout_tags()
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_CPU_IMAGE", "HARNESS_CALCULATOR_IMAGE")}
    has_docker = engine_answers() and tags is not None and all(image_exists(t) for t in tags)
    if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
        # CI provides the engine and this checkout's images: auto must pick docker; a probe that failed is the fault
        assert has_docker, "HARNESS_REQUIRE_DOCKER=1 but the engine or this checkout's images did not answer"
    expected = "docker" if has_docker else "local"
    env.update(
        HARNESS_RESULTS=str(tmp_path / "results"), HARNESS_ARTIFACTS=str(tmp_path / "artifacts"), PYTHONPATH=str(REPO)
    )
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "arith", "--eval-only", "--limit", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first = proc.stdout.splitlines()[0]
    if has_docker:
        assert first == "backend: docker (engine and images available)"
    else:
        assert first.startswith("backend: local"), first
    assert f" backend={expected}" in proc.stdout.splitlines()[1]  # the run's header line
    (row,) = ResultStore(tmp_path / "results").runs("arith")
    assert row.status == "complete" and row.backend == expected
    manifest = ResultStore(tmp_path / "results").manifest("arith", row.run_id)
    assert manifest.backend is not None and manifest.backend.name == expected
    if has_docker:
        assert tags is not None
        # the images that ran are this checkout's, pinned by id
        ids = {
            ref: subprocess.run(
                ["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True, check=True
            ).stdout.strip()
            for ref in tags
        }
        images = manifest.backend.images
        assert {images["cpu"].ref: images["cpu"].id, images["calculator"].ref: images["calculator"].id} == ids, (
            manifest.backend.model_dump_json()[:2000]
        )
