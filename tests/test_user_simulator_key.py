"""An external user simulator (HARNESS_USER_SIMULATOR_URL / _MODEL / _API_KEY): the run talks to it with the key,
and the key is written nowhere: not in the results (rows, outcomes, manifests), not in the run's artifacts (its
manifest, rollouts, τ²'s own results files, server logs), not in the harness's output.

The endpoint is real: the smoke model served by vLLM on the CPU, behind a small proxy that, like a hosted API,
answers only requests that carry the key (and records what each one carried). The run is τ²'s smoke profile,
evaluation only, one task and one trial.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from harness.results.store.store import ResultStore
from harness.rollout.loading import open_benchmark
from harness.serving.server import serve
from support import REPO

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from support_reliability import FaultProxy, grep_files, send_json

pytestmark = pytest.mark.slow


class KeyedProxy(FaultProxy):
    """Forwards to ``upstream`` the requests that carry ``Authorization: Bearer <key>``; 401 for the others."""

    def __init__(self, upstream: str, key: str) -> None:
        super().__init__(upstream, [])
        self.key = key
        self.seen: list[tuple[str, str]] = []

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        given = request.headers.get("Authorization", "")
        with self.lock:
            self.seen.append((request.path, given))
        if given != f"Bearer {self.key}":
            send_json(request, 401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            return
        super().handle(request)


def test_the_simulator_key_is_used_and_written_nowhere(smoke_model: Path, tmp_path: Path) -> None:
    canary = f"sk-canary-{uuid.uuid4().hex}"
    spec = open_benchmark("tau2", "smoke")[0]
    with serve(smoke_model, "user-simulator", spec.serving, tmp_path / "simulator.log") as server:
        proxy = KeyedProxy(server.endpoint.base_url, canary)
        with proxy:
            env = dict(
                os.environ,
                HARNESS_RESULTS=str(tmp_path / "results"),
                HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
                HARNESS_USER_SIMULATOR_URL=proxy.base_url,
                HARNESS_USER_SIMULATOR_MODEL=server.endpoint.model,
                HARNESS_USER_SIMULATOR_API_KEY=canary,
                PYTHONPATH=str(REPO),
            )
            args = ["run", "tau2", "--eval-only", "--limit", "1", "--trials", "1", "--backend", "local"]
            proc = subprocess.run(
                [sys.executable, "-m", "harness.cli", *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=REPO,
                timeout=900,
            )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the run used the endpoint, with the key, on every request
    chats = [given for path, given in proxy.seen if path.endswith("/chat/completions")]
    assert chats and all(given == f"Bearer {canary}" for given in chats), proxy.seen[:5]

    (row,) = ResultStore(tmp_path / "results").runs("tau2")
    assert row.status == "complete" and row.infra_errors_after == 0
    manifest = ResultStore(tmp_path / "results").manifest("tau2", row.run_id)
    assert manifest.user_simulator is not None
    assert manifest.user_simulator.model_dump() == {
        "source": "endpoint",
        "model": "user-simulator",
        "hash": "",
        "host": "127.0.0.1",
    }
    run_dir = tmp_path / "artifacts" / "runs" / row.run_id
    assert not (run_dir / "server-user-simulator.log").exists()  # no simulator of its own was served
    assert (run_dir / "rollouts-after.jsonl").is_file() and (run_dir / "native-results-after.json").is_file()

    # ... and the key is nowhere
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file()]
    written += [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert len(written) >= 8, written  # the row, outcomes, manifests, rollouts, logs: something to search
    assert grep_files(tmp_path / "results", canary) == []
    assert grep_files(tmp_path / "artifacts", canary) == []
    assert canary not in proc.stdout and canary not in proc.stderr
    # the same search does find what the files do hold
    assert grep_files(tmp_path / "results", row.run_id) and grep_files(tmp_path / "artifacts", row.run_id)
