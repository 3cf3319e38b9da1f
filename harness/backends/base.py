"""The backend interface: start the harness's long-running processes (model server, trainer, tool servers).

The runner decides *what* runs (a server for this checkpoint, a trainer for this request); a backend decides
*where*: as a local subprocess in one of the ``make env`` environments, or in a container of the pinned images.
Every process a backend starts is stopped by ``Handle.stop`` and, as a last resort, by ``Backend.close``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from harness.errors import HarnessError
from harness.registry import Registry

if TYPE_CHECKING:
    from harness.results.store.manifest import BackendRecord
    from harness.tools.servers import ToolServer

Role = Literal["server", "train"]


@dataclass(frozen=True)
class LaunchSpec:
    """One process to start: ``python <argv>`` in the named environment."""

    role: Role
    env_name: str
    """Which environment's interpreter: ``serve-cpu`` (model server) or ``harness`` (trainer)."""
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    mounts: tuple[Path, ...] = ()
    """Host paths the process reads or writes; containers see them at the same path."""
    port: int | None = None
    """A TCP port the process listens on, reachable from the host at 127.0.0.1."""
    capture_stdout: bool = False
    """Stream stdout lines through ``Handle.lines()`` (and into the log) instead of only into the log."""
    labels: dict[str, str] = field(default_factory=dict)


class Handle(Protocol):
    """A started process."""

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        ...

    def wait(self, timeout: float | None = None) -> int: ...

    def lines(self) -> Iterator[str]:
        """Output lines as they come (``capture_stdout`` only); ends when the process ends."""
        ...

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate, then kill after ``grace_s``; idempotent."""
        ...


class Backend(Protocol):
    name: ClassVar[str]

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether a run can use this backend on this machine, and why not (``--backend auto`` asks)."""
        ...

    def launch(self, spec: LaunchSpec) -> Handle: ...

    def tool_command(self, server: type[ToolServer]) -> list[str]:
        """The command that runs ``server`` (a stdio tool server, :mod:`harness.tools.servers`) on this backend."""
        ...

    def describe(self) -> BackendRecord:
        """What the run manifest records about this backend (e.g. image digests)."""
        ...

    def close(self) -> None:
        """Stop and remove everything this backend started that is still there."""
        ...


BACKENDS: Registry[type[Backend]] = Registry("backend", HarnessError)
"""Backends by name; the package (:mod:`harness.backends`) loads the built-in ones on the first lookup."""
register_backend = BACKENDS.register
