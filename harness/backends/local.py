"""Local subprocesses, each in its own process group, in the environments ``make env`` creates."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import IO, Any, ClassVar

from harness.backends.base import LaunchSpec, register_backend
from harness.errors import HarnessError
from harness.paths import env_python
from harness.tools.calculator import calculator_command


class LocalHandle:
    def __init__(self, proc: subprocess.Popen[str], log: IO[str] | None) -> None:
        self.proc = proc
        self._log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout=timeout)

    def lines(self) -> Iterator[str]:
        if self.proc.stdout is None:
            return
        for line in self.proc.stdout:
            if self._log is not None:
                self._log.write(line)
                self._log.flush()
            yield line

    def stop(self, grace_s: float = 10.0) -> None:
        proc = self.proc
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if self._log is not None and not self._log.closed:
            self._log.close()


def _interpreter(env_name: str) -> str:
    if env_name == "harness":
        import sys

        return sys.executable
    python = env_python(env_name)
    if not python.exists():
        raise HarnessError(f"environment {env_name!r} not found at {python.parent.parent} (run `make env`)")
    return str(python)


@register_backend
class LocalBackend:
    name: ClassVar[str] = "local"

    def __init__(self, **_: Any) -> None:
        self._handles: list[LocalHandle] = []

    def launch(self, spec: LaunchSpec) -> LocalHandle:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = spec.log_path.open("a", encoding="utf-8")
        cmd = [_interpreter(spec.env_name), *spec.argv]
        try:
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE if spec.capture_stdout else log,
                stderr=subprocess.STDOUT,
                env=spec.env,
                text=True,
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise HarnessError(f"cannot start {spec.role} process ({cmd[0]}): {exc.strerror}") from None
        handle = LocalHandle(proc, log)
        self._handles.append(handle)
        return handle

    def calculator_command(self) -> list[str]:
        return calculator_command()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def close(self) -> None:
        for handle in self._handles:
            handle.stop(grace_s=5)
        self._handles.clear()
