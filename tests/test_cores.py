"""The model servers and trainers the harness starts let OpenMP's waiting threads spin briefly, then sleep
(harness.serving.cores), unless the user's environment names a wait policy or a spin count. (A running vLLM server's
/proc/<pid>/environ cannot show it: vLLM sets its process titles over the environment block.)"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import LaunchSpec
from harness.backends.local import LocalBackend
from harness.engines.base import TrainRequest
from harness.engines.child import run_trainer
from harness.rollout.loading import open_benchmark

REPORT = (
    "import json, os; print(json.dumps("
    "{'omp': os.environ.get('OMP_WAIT_POLICY'), 'spin': os.environ.get('GOMP_SPINCOUNT')}))"
)
HARNESS_POLICY = {"omp": "PASSIVE", "spin": "5000"}


class ReportingBackend(LocalBackend):
    """A real local launch of a one-line worker that reports the wait policy it was started with."""

    def launch(self, spec: LaunchSpec) -> Any:
        self.launched = spec
        return super().launch(replace(spec, argv=["-c", REPORT]))


def _trainer_policy(tmp_path: Path) -> dict[str, str | None]:
    spec, path, _ = open_benchmark("math", "smoke")
    request = TrainRequest(
        spec=spec,
        spec_path=path,
        base_model=tmp_path,
        output_dir=tmp_path / "out",
        seed=0,
        log_path=tmp_path / "train.log",
        backend=ReportingBackend(),
    )
    job = tmp_path / "job.json"
    job.write_text("{}")
    assert run_trainer(request, what="test training", module="unused", job=job, mounts=()) == []
    reported = json.loads(request.log_path.read_text().splitlines()[-1])  # the worker's stdout is in its log
    return {"omp": reported["omp"], "spin": reported["spin"]}


def _server_policy() -> dict[str, str | None]:
    from harness.serving.server import server_env

    env = server_env()
    return {"omp": env.get("OMP_WAIT_POLICY"), "spin": env.get("GOMP_SPINCOUNT")}


@pytest.fixture(autouse=True)
def _no_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)


def test_a_trainer_starts_with_the_short_spin(tmp_path: Path) -> None:
    assert _trainer_policy(tmp_path) == HARNESS_POLICY
    assert "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ  # the harness's own is left


def test_the_users_wait_policy_or_spin_count_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert _trainer_policy(tmp_path) == _server_policy() == {"omp": "ACTIVE", "spin": None}
    monkeypatch.setenv("OMP_WAIT_POLICY", "")  # set but empty: OpenMP's own default, nothing passed on
    assert _trainer_policy(tmp_path) == _server_policy() == {"omp": None, "spin": None}
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "0")  # a spin count alone: the policy is left to OpenMP
    assert _trainer_policy(tmp_path) == _server_policy() == {"omp": None, "spin": "0"}
    monkeypatch.delenv("GOMP_SPINCOUNT")
    assert _server_policy() == HARNESS_POLICY


def test_a_model_server_is_launched_with_the_short_spin(tmp_path: Path) -> None:
    from harness.serving.server import launch

    spec, _, _ = open_benchmark("math", "smoke")
    backend = ReportingBackend()
    server = launch(tmp_path, "policy", spec.serving, tmp_path / "server.log", backend=backend)
    server.stop()
    env = backend.launched.env
    assert backend.launched.role == "server" and (env["OMP_WAIT_POLICY"], env["GOMP_SPINCOUNT"]) == ("PASSIVE", "5000")
