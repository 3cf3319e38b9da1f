"""Start, health-check and stop an OpenAI-compatible model server (vLLM) for one checkpoint.

A backend starts the server: locally in its own environment (``serve-cpu`` made by ``make env``) and process
group, or in a container. Its output goes to a log file that errors name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from harness.backends.base import Backend, Handle, LaunchSpec
from harness.errors import ServingError
from harness.serving import hardware
from harness.serving.cores import share_cores
from harness.serving.hardware import serving_dtype
from harness.spec import ServingSpec

POLL_S = 0.25
CHUNKED_PREFILL_FLAGS = ("--enable-chunked-prefill", "--no-enable-chunked-prefill")
"""On a machine without a GPU the server runs without chunked prefill unless the spec's ``extra_args`` say otherwise:
vLLM's CPU engine dies (``RuntimeError: CPU Generator does not use offset``) when a seeded request sampled above
temperature 0 is still in a partly computed prompt, as BFCL's evaluation of 40 tasks x 4 samples with 64 at once
is at its first step. The GPU's generators take that rollback; there vLLM keeps its default."""


GPU_START_ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
"""vLLM's own top-k/top-p sampling instead of FlashInfer's, whose kernels are compiled when a machine starts its
first server: on fresh one-GPU machines that start spent 81, 88 and 119 s in vLLM's engine set-up, and 12 s (then
3 s for the next server) without it (bench/results/gpu-server-start.md). Set for every server the harness starts
(the policy's, the user simulator's and VERL's rollout servers); the user's environment wins."""


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
        serving_dtype(serving.dtype),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        serving.tool_call_parser,
        "--disable-log-stats",
        "--generation-config",
        "vllm",
    ]
    if serving.enforce_eager:
        args.append("--enforce-eager")
    if serving.kv_cache_gib is not None:
        args += ["--kv-cache-memory-bytes", str(int(serving.kv_cache_gib * 2**30))]
    chosen = any(a.split("=")[0] in CHUNKED_PREFILL_FLAGS for a in serving.extra_args)
    if not chosen and not hardware.gpu_names():
        args.append("--no-enable-chunked-prefill")
    return args + list(serving.extra_args)


def server_env(serving: ServingSpec | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    serving = serving or ServingSpec()
    if serving.kv_cache_gib is None:  # (set, vLLM would take this variable over the size in the arguments)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(serving.cpu_kv_cache_gib))
    # Development endpoints (in-place weight reload, prefix-cache reset) for ModelServer.load; the server listens
    # on the loopback interface only (or inside its container).
    env.setdefault("VLLM_SERVER_DEV_MODE", "1")
    # On a CPU, the model runs inside vLLM's engine process (its single-process executor, what one GPU gets by
    # default) instead of a third process fed through a busy-polled shared-memory queue: on 2 cores the server
    # answers ~9 s sooner and decodes ~35 % faster (bench/startup.py). vLLM's API server keeps its engine in a
    # process of its own either way; on a GPU the variable changes nothing for it.
    env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    share_cores(env)  # its OpenMP threads sleep soon when they wait, beside a trainer or another server
    for key, value in GPU_START_ENV.items():
        env.setdefault(key, value)
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


TRANSIENT_START_FAILURES = ("Error in memory profiling",)
"""Start failures that a second start gets past: vLLM refuses to start when another process on the same GPU frees
memory while it measures what is free (two runs sharing one GPU)."""
START_ATTEMPTS = 3


def transient_start_failure(log_path: Path) -> str | None:
    """The transient failure named at the end of a server log, if any."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, log_path.stat().st_size - 65536))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return next((marker for marker in TRANSIENT_START_FAILURES if marker in tail), None)


_LOG_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) )*(?:(?:ERROR|WARNING|INFO|DEBUG) \S+ \S+ \[[^\]]*\] )?")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (\S.*)$")


def first_error(log_path: Path) -> str | None:
    """The first ``SomethingError: message`` line of a server log (the root cause of its first traceback), without
    the process prefixes vLLM puts before it; None when the log has none or cannot be read."""
    try:
        with log_path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                found = _EXCEPTION_LINE.match(_LOG_PREFIX.sub("", line.strip(), count=1))
                if found:
                    return f"{found.group(1)}: {found.group(2)}"[:300]
    except OSError:
        return None
    return None


class ModelServer:
    """A model server started by a backend. Use :func:`serve` as a context manager.

    With ``relaunch``, a server that dies while starting for a transient reason (:data:`TRANSIENT_START_FAILURES`,
    read from its log) is started again, at most ``START_ATTEMPTS`` times in all.
    """

    def __init__(
        self, handle: Handle, log_path: Path, endpoint: Endpoint, relaunch: Callable[[], Handle] | None = None
    ) -> None:
        self.handle = handle
        self.log_path = log_path
        self.endpoint = endpoint
        self.launched_at = time.monotonic()
        self.relaunch = relaunch
        self.attempts = 1

    def alive(self) -> bool:
        return self.handle.poll() is None

    def _check(self, timeout_s: float) -> None:
        code = self.handle.poll()
        if code is not None:
            reason = transient_start_failure(self.log_path)
            if reason and self.relaunch is not None and self.attempts < START_ATTEMPTS:
                self.attempts += 1
                self.handle = self.relaunch()
                self.launched_at = time.monotonic()
                return
            why = f" ({reason})" if reason else ""
            raise ServingError(f"model server exited with code {code} while starting{why}; see {self.log_path}")
        if time.monotonic() - self.launched_at > timeout_s:
            raise ServingError(f"model server not ready after {timeout_s:.0f} s; see {self.log_path}")

    def wait_ready(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> None:
        """Poll ``/v1/models`` until the server answers, at most ``timeout_s`` after the launch; fail fast when the
        process dies. ``tick`` gets the seconds since the launch."""
        url = self.endpoint.base_url.rstrip("/") + "/models"
        while True:
            self._check(timeout_s)
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if tick is not None:
                tick(time.monotonic() - self.launched_at)
            time.sleep(POLL_S)

    async def wait_ready_async(self, timeout_s: float, tick: Callable[[float], None] | None = None) -> None:
        """:meth:`wait_ready` on an event loop (cancellable), so other set-up can run while the server starts."""
        url = self.endpoint.base_url.rstrip("/") + "/models"
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                self._check(timeout_s)
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if tick is not None:
                    tick(time.monotonic() - self.launched_at)
                await asyncio.sleep(POLL_S)

    def load(self, checkpoint: Path, timeout_s: float = 600.0) -> float:
        """Serve ``checkpoint`` from now on: load its weights into the running server in place (same architecture
        and tokenizer as the served model), then drop the prefix cache computed with the old weights. Returns the
        seconds it took. Raises :class:`ServingError` naming the server log when the server refuses."""
        root = self.endpoint.base_url.rstrip("/").removesuffix("/v1")
        start = time.monotonic()
        try:
            r = httpx.post(
                f"{root}/collective_rpc",
                json={"method": "reload_weights", "kwargs": {"weights_path": str(checkpoint)}},
                timeout=timeout_s,
            )
            if r.status_code == 200:
                r = httpx.post(f"{root}/reset_prefix_cache", timeout=60.0)
        except httpx.HTTPError as exc:
            why = f"loading {checkpoint} into the model server failed ({exc}); see {self.log_path}"
            raise ServingError(why) from exc
        if r.status_code != 200:
            raise ServingError(
                f"loading {checkpoint} into the model server failed (HTTP {r.status_code}); see {self.log_path}"
            )
        return time.monotonic() - start

    def stop(self, grace_s: float = 10.0) -> None:
        self.handle.stop(grace_s)


def launch(
    checkpoint: Path,
    name: str,
    serving: ServingSpec,
    log_path: Path,
    port: int | None = None,
    backend: Backend | None = None,
    labels: dict[str, str] | None = None,
) -> ModelServer:
    """Start serving ``checkpoint`` under ``name`` and return at once (see :meth:`ModelServer.wait_ready`).

    The caller stops it (:func:`serve` does); the backend's ``close`` stops it in any case.
    """
    if backend is None:
        from harness.backends import get_backend

        backend = get_backend("local")
    port = port or free_port()
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model=name)
    spec = LaunchSpec(
        role="server",
        env_name="serve-cpu",
        argv=vllm_args(checkpoint, name, port, serving),
        env=server_env(serving),
        log_path=log_path,
        mounts=(checkpoint,),
        port=port,
        labels=labels or {},
    )
    chosen = backend
    return ModelServer(chosen.launch(spec), log_path, endpoint, relaunch=lambda: chosen.launch(spec))


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
    """Serve ``checkpoint`` under ``name`` for the duration of the block (locally unless a backend is given).

    A run's policy server, which outlives phases and swaps checkpoints, is :class:`harness.serving.policy.PolicyServer`.
    """
    server = launch(checkpoint, name, serving, log_path, port, backend, labels)
    try:
        server.wait_ready(serving.startup_timeout_s, tick)
        yield server
    finally:
        server.stop()
