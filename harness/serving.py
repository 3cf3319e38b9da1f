"""Start, health-check and stop an OpenAI-compatible model server (vLLM) for one checkpoint.

A backend starts the server: locally in its own environment (``serve-cpu`` made by ``make env``) and process
group, or in a container. Its output goes to a log file that errors name.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.backends.base import Backend, Handle, LaunchSpec
from harness.errors import ServingError
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


def vllm_args(checkpoint: Path, name: str, port: int, serving: ServingSpec) -> list[str]:
    """Arguments after the interpreter that start vLLM's OpenAI-compatible server for ``checkpoint``."""
    args = [
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
        args.append("--enforce-eager")
    return args + list(serving.extra_args)


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


class ModelServer:
    """A model server started by a backend. Use :func:`serve` as a context manager."""

    def __init__(self, handle: Handle, log_path: Path, endpoint: Endpoint) -> None:
        self.handle = handle
        self.log_path = log_path
        self.endpoint = endpoint

    def alive(self) -> bool:
        return self.handle.poll() is None

    def wait_ready(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> None:
        """Poll ``/v1/models`` until the server answers; fail fast when the process dies."""
        deadline = time.monotonic() + timeout_s
        url = self.endpoint.base_url.rstrip("/") + "/models"
        start = time.monotonic()
        while time.monotonic() < deadline:
            code = self.handle.poll()
            if code is not None:
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
        self.handle.stop(grace_s)


@contextlib.contextmanager
def serve(
    checkpoint: Path,
    name: str,
    serving: ServingSpec,
    log_path: Path,
    tick: Callable[[float], None] | None = None,
    port: int | None = None,
    backend: Backend | None = None,
    labels: dict[str, str] | None = None,
) -> Iterator[ModelServer]:
    """Serve ``checkpoint`` under ``name`` for the duration of the block (locally unless a backend is given)."""
    if backend is None:
        from harness.backends import get_backend

        backend = get_backend("local")
    port = port or free_port()
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model=name)
    handle = backend.launch(
        LaunchSpec(
            role="server",
            env_name="serve-cpu",
            argv=vllm_args(checkpoint, name, port, serving),
            env=server_env(),
            log_path=log_path,
            mounts=(checkpoint,),
            port=port,
            labels=labels or {},
        )
    )
    server = ModelServer(handle, log_path, endpoint)
    try:
        server.wait_ready(serving.startup_timeout_s, tick)
        yield server
    finally:
        server.stop()
