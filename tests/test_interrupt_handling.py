"""harness.run.interrupts in a real process: the first signal stops the children at once and unwinds; clean-up that
hangs is cut off after the grace period (stacks printed, children killed, exit 130); a second signal forces it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from support import REPO

# A stand-in for a run: two children (one leading its own session, like a model server; one in our group, like the
# calculator), then a wait; on KeyboardInterrupt it "cleans up" for CLEANUP_S seconds, printing when it is done.
SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from harness.run import interrupts
    with interrupts.installed():
        own = subprocess.Popen(["sleep", "1000"], start_new_session=True)
        same = subprocess.Popen(["sleep", "1000"])
        try:
            print("children", own.pid, same.pid, flush=True)
            time.sleep(1000)
        except KeyboardInterrupt:
            print("unwinding", flush=True)
            time.sleep(float(sys.argv[1]))
            print("cleaned up", flush=True)
            sys.exit(130)
    """
)


def start(tmp_path: Path, cleanup_s: float, grace_s: float) -> tuple[subprocess.Popen[str], list[int]]:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_INTERRUPT_GRACE_S=str(grace_s))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(cleanup_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("children"), line
    return proc, [int(p) for p in line.split()[1:]]


def gone(pids: list[int], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                continue
        if not alive:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_stops_the_children_before_clean_up_finishes(tmp_path: Path, signum: int) -> None:
    proc, children = start(tmp_path, cleanup_s=3, grace_s=60)
    proc.send_signal(signum)
    assert gone(children, 2), "the children outlived the signal"
    assert proc.poll() is None  # still cleaning up
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "unwinding" in out and "cleaned up" in out


def test_clean_up_that_hangs_is_cut_off_after_the_grace_period(tmp_path: Path) -> None:
    proc, children = start(tmp_path, cleanup_s=1000, grace_s=2)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert time.monotonic() - started < 20
    assert "did not finish in 2 s" in out
    assert "most recent call first" in out  # every thread's stack, where the clean-up hung
    assert "cleaned up" not in out
    assert gone(children, 2)


def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    proc, children = start(tmp_path, cleanup_s=1000, grace_s=600)
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "SIGINT again" in out
    assert "cleaned up" not in out
    assert gone(children, 2)


def test_the_cli_leaves_the_signal_handlers_as_it_found_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI called in-process (as tests and embedding code do) restores SIGINT/SIGTERM and SIGUSR1 handling."""
    import contextlib

    from harness import cli

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with contextlib.suppress(SystemExit):
        monkeypatch.setattr(sys, "argv", ["harness", "validate", "math", "--profile", "smoke"])
        cli.main()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


# A stand-in for a run writing its row when the signal comes: the block finishes, then the interrupt is raised.
RECORDING = textwrap.dedent(
    """
    import subprocess, sys, time
    from harness.run import interrupts
    with interrupts.installed():
        own = subprocess.Popen(["sleep", "1000"], start_new_session=True)
        try:
            with interrupts.deferred():
                print("children", own.pid, flush=True)
                time.sleep(float(sys.argv[1]))  # the signal arrives here
                print("row written", flush=True)
            print("not reached", flush=True)
        except KeyboardInterrupt:
            print("interrupted after the row", flush=True)
            sys.exit(130)
    """
)


def test_a_signal_while_the_row_is_written_is_raised_once_it_is_written(tmp_path: Path) -> None:
    script = tmp_path / "record.py"
    script.write_text(RECORDING)
    env = dict(os.environ, PYTHONPATH=str(REPO), HARNESS_INTERRUPT_GRACE_S="60")
    proc = subprocess.Popen(
        [sys.executable, str(script), "3"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("children"), line
    proc.send_signal(signal.SIGINT)
    assert gone([int(line.split()[1])], 2), "the children outlived the signal"  # stopped at once, as always
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert out.splitlines() == ["row written", "interrupted after the row"], out
