"""Start, health-check and stop an OpenAI-compatible model server (vLLM) for one checkpoint.

The server runs in its own environment (``serve-cpu`` made by ``make env``, or ``HARNESS_ENV_SERVE_CPU``) and
its own process group, so stopping it takes every child with it. Its output goes to a log file that errors name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.errors import ServingError
from harness.paths import env_python
from harness.spec import ServingSpec


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Endpoint:
    """Where a served model answers: ``base_url`` ends in ``/v1``."""

    base_url: str
    model: str


def vllm_command(python: Path, checkpoint: Path, name: str, port: int, serving: ServingSpec) -> list[str]:
    cmd = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(checkpoint),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(serving.max_model_len),
        "--dtype",
        serving.dtype,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        serving.tool_call_parser,
        "--disable-log-stats",
        "--generation-config",
        "vllm",
    ]
    if serving.enforce_eager:
        cmd.append("--enforce-eager")
    return cmd + list(serving.extra_args)


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.pop("PYTHONPATH", None)
    return env


class ModelServer:
    """A running model server process. Use :func:`serve` as a context manager."""

    def __init__(self, cmd: list[str], log_path: Path, endpoint: Endpoint) -> None:
        self.cmd = cmd
        self.log_path = log_path
        self.endpoint = endpoint
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, env=_server_env(), start_new_session=True
            )
        except OSError as exc:
            raise ServingError(f"cannot start model server ({self.cmd[0]}): {exc.strerror}") from None
        finally:
            log.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_ready(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> None:
        """Poll ``/v1/models`` until the server answers; fail fast when the process dies."""
        deadline = time.monotonic() + timeout_s
        url = self.endpoint.base_url.rstrip("/") + "/models"
        start = time.monotonic()
        while time.monotonic() < deadline:
            if not self.alive():
                code = self._proc.returncode if self._proc else None
                raise ServingError(f"model server exited with code {code} while starting; see {self.log_path}")
            try:
                r = httpx.get(url, timeout=2.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if tick is not None:
                tick(time.monotonic() - start)
            time.sleep(0.5)
        raise ServingError(f"model server not ready after {timeout_s:.0f} s; see {self.log_path}")

    def stop(self, grace_s: float = 10.0) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextlib.contextmanager
def serve(
    checkpoint: Path,
    name: str,
    serving: ServingSpec,
    log_path: Path,
    tick: Callable[[float], None] | None = None,
    port: int | None = None,
) -> Iterator[ModelServer]:
    """Serve ``checkpoint`` under ``name`` for the duration of the block."""
    python = env_python("serve-cpu")
    if not python.exists():
        raise ServingError(f"model-server environment not found at {python.parent.parent} (run `make env`)")
    port = port or free_port()
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model=name)
    server = ModelServer(vllm_command(python, checkpoint, name, port, serving), log_path, endpoint)
    server.start()
    try:
        server.wait_ready(serving.startup_timeout_s, tick)
        yield server
    finally:
        server.stop()
