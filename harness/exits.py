"""Why a child process ended, in words a user can act on.

A negative return code is a signal (a container's 128 + n the same). SIGKILL is what the kernel's out-of-memory
killer sends: :class:`ExitWatch` reads the cgroup's ``oom_kill`` counter (``memory.events``) when a child starts
and again when it ends, so a kill the kernel made for memory is named as such; without that evidence a SIGKILL is
still named, with the likely cause.
"""

from __future__ import annotations

import signal
from pathlib import Path

MEMORY_EVENTS = Path("/sys/fs/cgroup/memory.events")


def oom_kills(events: Path = MEMORY_EVENTS) -> int | None:
    """The cgroup's count of processes killed for memory, or None where it cannot be read."""
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def signal_of(code: int) -> int | None:
    if code < 0:
        return -code
    if 128 < code < 160:  # a shell's or a container runtime's report of a signal
        return code - 128
    return None


class ExitWatch:
    """Started with a child process; :meth:`describe` words its return code."""

    def __init__(self, events: Path = MEMORY_EVENTS) -> None:
        self.events = events
        self.before = oom_kills(events)

    def describe(self, code: int) -> str:
        sig = signal_of(code)
        if sig is None:
            return f"exited with code {code}"
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig != signal.SIGKILL:
            return f"was stopped by {name}"
        after = oom_kills(self.events)
        if self.before is not None and after is not None and after > self.before:
            return "was killed by the kernel's out-of-memory killer (SIGKILL): the machine ran out of memory"
        return "was killed by SIGKILL, most likely the kernel's out-of-memory killer (see Troubleshooting)"
