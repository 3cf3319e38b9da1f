"""Containers of the pinned images (Docker Engine API, through the Docker SDK).

The model server and the trainer run in the CPU image (``harness-cpu``), the calculator in its own image
(``harness-calculator``), each started with this run's labels so that :meth:`DockerBackend.close` can remove every
one of them, also after Ctrl-C. Containers share the host's network (a server's port is reachable at
``127.0.0.1:<port>`` exactly as with the local backend; the calculator has no network at all), run as the calling
user (files they write stay the user's), and see the host paths they need at the same paths: the launch's mounts,
the cache (datasets, converted models), the artifacts and the benchmarks.

Images: ``HARNESS_CPU_IMAGE`` / ``HARNESS_CALCULATOR_IMAGE``; by default, in a checkout, the content-derived tags
of this checkout's images (``scripts/build-images.sh --tags-only``), so the code that runs in a container is the
checkout's: images built from older code are not used (``--backend auto`` then runs locally and says why).
Outside a checkout, ``harness-cpu:latest`` / ``harness-calculator:latest``. A run pins the image IDs it found.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

from harness.backends.base import LaunchSpec, register_backend
from harness.backends.images import image_refs, missing_hint
from harness.errors import HarnessError
from harness.paths import artifacts_dir, benchmarks_dir, cache_dir
from harness.results.store.manifest import BackendRecord, DockerEngineRecord, ImageRecord
from harness.tools.servers import ToolServer

RUN_LABEL = "harness.run_id"
ROLE_LABEL = "harness.role"

# Interpreters inside the CPU image, by environment name (``LaunchSpec.env_name``).
IMAGE_PYTHON = {
    "harness": "/opt/venvs/harness/bin/python",
    "serve-cpu": "/opt/venvs/serve-cpu/bin/python",
    "calculator": "/opt/venvs/calculator/bin/python",
}

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
# Host settings that mean nothing (or the wrong thing) inside the image; the image sets its own.
HOST_ONLY_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "SHELL",
        "USER",
        "LOGNAME",
        "HOSTNAME",
        "TMPDIR",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "HARNESS_RESULTS",
    }
)
HOST_ONLY_PREFIXES = ("HARNESS_ENV_", "HARNESS_TOOL_", "PIP_", "CONDA_", "PYENV_", "XDG_", "SSH_", "DOCKER_")


def is_secret(name: str) -> bool:
    """OPENAI_API_KEY, HF_TOKEN, DB_PASSWORD, ...: a part of the name ends in a marker (TOKENIZERS_* is kept)."""
    return any(part.endswith(SECRET_MARKERS) for part in re.split(r"[_.\-]", name.upper()))


def container_env(env: dict[str, str]) -> dict[str, str]:
    """The launch environment as the container gets it: no secrets, no host-only settings, the host's paths."""
    out = {
        k: v
        for k, v in env.items()
        if not is_secret(k) and k not in HOST_ONLY_ENV and not k.startswith(HOST_ONLY_PREFIXES)
    }
    out.update(
        HOME="/tmp",  # noqa: S108  (inside the container: the caller's uid has no home in the image)
        HARNESS_CACHE=str(cache_dir().absolute()),
        HARNESS_ARTIFACTS=str(artifacts_dir().absolute()),
        HARNESS_BENCHMARKS=str(benchmarks_dir().absolute()),
    )
    return out


def mount_points(paths: list[Path]) -> list[Path]:
    """Absolute, existing, de-duplicated paths, without those already inside another (a parent mount shows them)."""
    chosen: list[Path] = []
    for path in sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if any(path == c or c in path.parents for c in chosen):
            continue
        if path == Path("/"):
            raise HarnessError("refusing to bind-mount / into a container")
        chosen.append(path)
    return chosen


def _client(timeout: int = 60) -> Any:
    try:
        import docker
    except ImportError:
        docker = None
    if not hasattr(docker, "from_env"):  # not installed (or only a folder named docker/ on the path)
        raise HarnessError("the docker backend needs the Docker SDK (`pip install docker==7.1.0`)")
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:
        raise HarnessError(f"no Docker engine answers at {_engine_address()} ({_why(exc)})") from None
    return client


def _engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _why(exc: BaseException) -> str:
    """Why the engine did not answer, in a few words (the SDK's own text nests three exceptions)."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__ or next((a for a in cur.args if isinstance(a, BaseException)), None)
    text = " ".join(str(e) for e in seen)
    for kind, words in (
        (FileNotFoundError, "nothing listens there"),
        (ConnectionRefusedError, "connection refused"),
        (PermissionError, "permission denied: is this user in the docker group?"),
    ):
        if any(isinstance(e, kind) for e in seen) or kind.__name__ in text:
            return words
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


class DockerHandle:
    """A started container: its output streams into the log (and through :meth:`lines` when captured)."""

    def __init__(self, container: Any, log: IO[str], capture: bool) -> None:
        self.container = container
        self._log = log
        self._lines: queue.Queue[str | None] | None = queue.Queue() if capture else None
        self._code: int | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._pump = threading.Thread(target=self._follow, name=f"logs-{container.short_id}", daemon=True)
        self._pump.start()

    @property
    def id(self) -> str:
        return str(self.container.id)

    def _follow(self) -> None:
        pending = b""
        try:
            # An error here means the container went away (stopped and removed): the stream simply ends.
            with contextlib.suppress(Exception):
                for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        self._emit(raw.decode("utf-8", "replace") + "\n")
            if pending:
                self._emit(pending.decode("utf-8", "replace"))
        finally:
            if self._lines is not None:
                self._lines.put(None)

    def _emit(self, line: str) -> None:
        with contextlib.suppress(ValueError):  # log closed by stop()
            self._log.write(line)
            self._log.flush()
        if self._lines is not None:
            self._lines.put(line)

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        try:
            self.container.reload()
        except Exception:  # removed behind our back: it is not running
            return self._code if self._code is not None else -1
        state = self.container.attrs.get("State", {})
        if state.get("Status") in ("exited", "dead"):
            self._code = int(state.get("ExitCode", -1))
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        if self._code is not None:
            return self._code
        try:
            result = self.container.wait(timeout=timeout)
        except Exception as exc:
            if self.poll() is not None:
                return self._code  # type: ignore[return-value]
            if timeout is not None:
                raise subprocess.TimeoutExpired(f"container {self.container.short_id}", timeout) from exc
            raise
        self._code = int(result.get("StatusCode", -1))
        self._pump.join(timeout=10)  # let the last lines reach the log
        return self._code

    def lines(self) -> Iterator[str]:
        if self._lines is None:
            return
        while True:
            line = self._lines.get()
            if line is None:
                return
            yield line

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM, SIGKILL after ``grace_s``, then remove the container; idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        with contextlib.suppress(Exception):
            self.container.stop(timeout=max(1, round(grace_s)))
        if self._code is None:
            with contextlib.suppress(Exception):
                self.poll()
        self._pump.join(timeout=5)
        with contextlib.suppress(Exception):
            self.container.remove(force=True)
        if not self._log.closed:
            self._log.close()


@register_backend
class DockerBackend:
    name: ClassVar[str] = "docker"

    def __init__(self, run_id: str | None = None, console: Any = None, **_: Any) -> None:
        self.run_id = run_id or f"adhoc-{uuid.uuid4().hex[:12]}"
        self.console = console
        self.client = _client()
        self.cpu_ref, self.calculator_ref = image_refs()
        self.images = {"cpu": self._image(self.cpu_ref), "calculator": self._image(self.calculator_ref)}
        self._handles: list[DockerHandle] = []
        self._count = 0

    def _image(self, ref: str) -> Any:
        import docker

        try:
            return self.client.images.get(ref)
        except docker.errors.ImageNotFound:
            raise HarnessError(missing_hint(ref)) from None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether a run can use this backend: the engine answers and both images exist."""
        try:
            client = _client(timeout=10)
        except HarnessError as exc:
            return False, str(exc)
        missing = []
        for ref in image_refs():
            try:
                client.images.get(ref)
            except Exception:
                missing.append(ref)
        with contextlib.suppress(Exception):
            client.close()
        if missing:
            return False, "; ".join(missing_hint(ref) for ref in missing)
        return True, "docker engine and images available"

    def launch(self, spec: LaunchSpec) -> DockerHandle:
        python = IMAGE_PYTHON.get(spec.env_name)
        if python is None:
            raise HarnessError(f"the docker backend has no environment {spec.env_name!r}")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        paths = [*spec.mounts, cache_dir(), artifacts_dir(), benchmarks_dir()]
        for path in paths:
            if not Path(path).exists():  # output folders the process is about to fill
                Path(path).mkdir(parents=True, exist_ok=True)
        volumes = {str(p.resolve()): {"bind": str(p), "mode": "rw"} for p in mount_points(paths)}
        # The offline dataset copy, if any, read-only (the trainer loads its split from there or from the cache).
        mirror = spec.env.get("HARNESS_DATA_MIRROR") or os.environ.get("HARNESS_DATA_MIRROR")
        if mirror and Path(mirror).is_dir():
            target = Path(os.path.abspath(mirror))
            if not any(target == Path(v["bind"]) or Path(v["bind"]) in target.parents for v in volumes.values()):
                volumes[str(target.resolve())] = {"bind": str(target), "mode": "ro"}
        self._count += 1
        labels = {**spec.labels, RUN_LABEL: self.run_id, ROLE_LABEL: spec.role}
        name = f"harness-{self.run_id}-{spec.role}-{self._count}-{uuid.uuid4().hex[:6]}"
        log = spec.log_path.open("a", encoding="utf-8")
        try:
            container = self.client.containers.run(
                self.images["cpu"].id,
                list(spec.argv),
                entrypoint=[python],
                name=name[:128],
                detach=True,
                init=True,
                network_mode="host",
                environment=container_env(spec.env),
                volumes=volumes,
                working_dir=str(Path.cwd()),
                user=f"{os.getuid()}:{os.getgid()}",
                labels=labels,
                shm_size="2g",
                stdin_open=False,
                tty=False,
            )
        except Exception as exc:
            log.close()
            self._remove_by_name(name)
            raise HarnessError(f"cannot start {spec.role} container: {exc}".splitlines()[0][:400]) from None
        handle = DockerHandle(container, log, spec.capture_stdout)
        self._handles.append(handle)
        return handle

    def _remove_by_name(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.client.containers.get(name).remove(force=True)

    def tool_command(self, server: type[ToolServer]) -> list[str]:
        """A ``docker run`` of the image of the server's environment (the calculator image for ``calculator``),
        without network, with 512 MB and one CPU."""
        image = self.images.get(server.env)
        python = IMAGE_PYTHON.get(server.env)
        if image is None or python is None:
            raise HarnessError(f"the docker backend has no image for environment {server.env!r} ({server.name})")
        return [
            "docker",
            "run",
            "-i",
            "--rm",
            "--network",
            "none",
            "--memory",
            "512m",
            "--cpus",
            "1",
            "--label",
            f"{RUN_LABEL}={self.run_id}",
            "--entrypoint",
            python,
            image.id,
            "-c",
            server.code,
        ]

    def describe(self) -> BackendRecord:
        version: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            version = self.client.version()
        return BackendRecord(
            name=self.name,
            engine=DockerEngineRecord(version=version.get("Version", ""), api_version=version.get("ApiVersion", "")),
            images={
                role: ImageRecord(
                    ref=ref,
                    id=image.id,
                    digest=(image.attrs.get("RepoDigests") or [image.id])[0],
                    repo_digests=list(image.attrs.get("RepoDigests") or []),
                    tags=list(image.tags),
                    content_hash=(image.labels or {}).get("io.harness.content-hash", ""),
                )
                for role, ref, image in (
                    ("cpu", self.cpu_ref, self.images["cpu"]),
                    ("calculator", self.calculator_ref, self.images["calculator"]),
                )
            },
        )

    def close(self) -> None:
        """Stop this backend's containers, then remove every container labelled with the run id (calculators too)."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.stop(grace_s=5)
        with contextlib.suppress(Exception):
            for container in self.client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}):
                with contextlib.suppress(Exception):
                    container.remove(force=True)
