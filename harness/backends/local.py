"""Local subprocesses, each in its own process group, in the environments ``make env`` creates."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import IO, Any, ClassVar

from harness.backends.base import LaunchSpec, register_backend
from harness.errors import HarnessError
from harness.paths import env_python
from harness.results.store.manifest import BackendRecord
from harness.tools.servers import ToolServer, local_command


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
        """SIGTERM the whole process group, SIGKILL what is left of it after ``grace_s``.

        The group, not only its leader: a model server's engine and worker processes can outlive the API process
        (one that exits while they start, or is killed first), and would otherwise run on as orphans.
        """
        proc, group = self.proc, self.proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None or _group_alive(group):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
            proc.wait(timeout=10)
        if self._log is not None and not self._log.closed:
            self._log.close()


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM for the duration of the block, then act on them: a child started in the block is
    registered (so that clean-up stops it) before the interrupt is raised. Only on the main thread, where Python
    runs signal handlers; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    if any(h is None for h in previous.values()):  # a handler not set from Python: leave it alone
        yield
        return
    pending: list[int] = []
    for s in previous:
        signal.signal(s, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for signum in pending[:1]:
            handler = previous[signal.Signals(signum)]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)


def _group_alive(group: int) -> bool:
    """Whether any process of the group is left (an exited leader that was waited for no longer counts)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Always: its processes run in the ``make env`` environments, which each launch checks for."""
        return True, ""

    def launch(self, spec: LaunchSpec) -> LocalHandle:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = spec.log_path.open("a", encoding="utf-8")
        cmd = [_interpreter(spec.env_name), *spec.argv]
        with signals_deferred():  # an interrupt between the fork and the registration would orphan the process
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

    def tool_command(self, server: type[ToolServer]) -> list[str]:
        return local_command(server)

    def describe(self) -> BackendRecord:
        return BackendRecord(name=self.name)

    def close(self) -> None:
        for handle in self._handles:
            handle.stop(grace_s=5)
        self._handles.clear()
