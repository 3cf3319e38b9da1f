"""The model servers and trainers the harness starts let OpenMP's waiting threads sleep (harness.cores), unless the
user's environment names a wait policy. (A running vLLM server's /proc/<pid>/environ cannot show it: vLLM sets its
process titles over the environment block.)"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import LaunchSpec
from harness.backends.local import LocalBackend
from harness.benchmark import open_benchmark
from harness.engines.base import TrainRequest
from harness.engines.child import PROGRESS_PREFIX, run_trainer

REPORT = f"import json, os; print({PROGRESS_PREFIX!r} + json.dumps({{'omp': os.environ.get('OMP_WAIT_POLICY')}}))"


class ReportingBackend(LocalBackend):
    """A real local launch of a one-line worker that reports the wait policy it was started with."""

    def launch(self, spec: LaunchSpec) -> Any:
        self.launched = spec
        return super().launch(replace(spec, argv=["-c", REPORT]))


def _trainer_policy(tmp_path: Path) -> str | None:
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
    records = run_trainer(request, what="test training", module="unused", job=job, mounts=())
    return records[0]["omp"]


def test_a_trainer_starts_with_the_passive_wait_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert _trainer_policy(tmp_path) == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ  # the harness's own environment is left alone


def test_the_users_wait_policy_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.serving import server_env

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert _trainer_policy(tmp_path) == "ACTIVE"
    assert server_env()["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "")  # set but empty: OpenMP's own default, nothing passed on
    assert _trainer_policy(tmp_path) is None and "OMP_WAIT_POLICY" not in server_env()
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert server_env()["OMP_WAIT_POLICY"] == "PASSIVE"


def test_a_model_server_is_launched_with_the_passive_wait_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.serving import launch

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    spec, _, _ = open_benchmark("math", "smoke")
    backend = ReportingBackend()
    server = launch(tmp_path, "policy", spec.serving, tmp_path / "server.log", backend=backend)
    server.stop()
    assert backend.launched.role == "server" and backend.launched.env["OMP_WAIT_POLICY"] == "PASSIVE"
