"""What Ctrl-C (SIGINT) and SIGTERM do to a run.

The first signal stops every child process at once (SIGTERM to each child's process group: the model servers,
the trainer, tool servers) and unwinds the harness as ``KeyboardInterrupt``, so each phase closes what it holds
and the run is recorded ``incomplete``. Stopping the children first means a GPU is free within seconds, whatever the
recording then takes, and that no clean-up can wait on a child that is still working.

Clean-up is Python code interrupted at an arbitrary point, so it is watched: if the harness has not exited
``HARNESS_INTERRUPT_GRACE_S`` seconds (default 120) after the signal, it prints every thread's stack, kills what is
left of its children and exits 130 without waiting further. A second signal does the same at once.

Writing a run's row is not cut short by a first signal (:func:`deferred`): the children stop at once as always,
and the interrupt is raised once the row is written, so a signal that arrives while a run is being recorded (its
last phase done, or a failure being recorded) loses no row.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import psutil

EXIT_CODE = 130
GRACE_ENV = "HARNESS_INTERRUPT_GRACE_S"
DEFAULT_GRACE_S = 120.0

_received: list[int] = []
_done = threading.Event()
_deferring = [0]
"""How many :func:`deferred` blocks the main thread is in."""
_held: list[int] = []
"""A first signal that arrived in a :func:`deferred` block, raised when the block ends."""


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """Route SIGINT and SIGTERM here for the block (SIGINT too when the parent started us with it ignored, as a
    shell does for background jobs); afterwards the previous handlers are back and a watchdog started by a signal
    in the block stands down."""
    global _done
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    _received.clear()
    _held.clear()
    _done = done = threading.Event()
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        yield
    finally:
        done.set()
        for s, handler in previous.items():
            if handler is not None:
                signal.signal(s, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A block that a first signal does not interrupt: the children are stopped at once (and the grace period's
    watchdog starts), and ``KeyboardInterrupt`` is raised when the block has finished. An exception of the block's
    own goes on as it is."""
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
    if not _deferring[0] and _held:
        _held.clear()
        raise KeyboardInterrupt


def received() -> bool:
    """Whether a first signal came (its ``KeyboardInterrupt`` may have been swallowed: the handler runs at any
    point, also inside code that reports an exception as "ignored" instead of raising it)."""
    return bool(_received)


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a signal came (whether or not its own ``KeyboardInterrupt`` was swallowed)."""
    if _received:
        raise KeyboardInterrupt


def grace_s() -> float:
    try:
        return max(0.0, float(os.environ.get(GRACE_ENV, DEFAULT_GRACE_S)))
    except ValueError:
        return DEFAULT_GRACE_S


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    if len(_received) == 1:
        stop_children(signal.SIGTERM)
        watchdog = threading.Thread(target=_watchdog, args=(grace_s(), _done), name="interrupt-watchdog", daemon=True)
        watchdog.start()
        if _deferring[0]:
            _held.append(signum)
            return
        raise KeyboardInterrupt
    _force_exit(f"{signal.Signals(signum).name} again: stopping every child process now")


def _watchdog(seconds: float, done: threading.Event) -> None:
    if done.wait(seconds):  # the harness finished its clean-up (or the block ended) in time
        return
    _force_exit(f"clean-up after the interrupt did not finish in {seconds:.0f} s: its stacks follow")


def _force_exit(message: str) -> None:
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{message}\n")
        sys.stderr.flush()
    with contextlib.suppress(Exception):  # to the process's own stderr, even where sys.stderr is replaced
        faulthandler.dump_traceback(file=sys.__stderr__ or sys.stderr, all_threads=True)
    stop_children(signal.SIGKILL)
    os._exit(EXIT_CODE)


def stop_children(sig: int) -> int:
    """Send ``sig`` to every descendant, and to the process group of each one that leads its own group (a model
    server's engine workers live there); never to this process's own group. Returns how many were signalled."""
    me = psutil.Process()
    own_group = os.getpgrp()
    try:
        children = me.children(recursive=True)
    except psutil.Error:
        return 0
    groups: set[int] = set()
    count = 0
    for child in children:
        with contextlib.suppress(psutil.Error, OSError):
            group = os.getpgid(child.pid)
            if group != own_group and group not in groups:
                groups.add(group)
                os.killpg(group, sig)
            else:
                child.send_signal(sig)
            count += 1
    return count
