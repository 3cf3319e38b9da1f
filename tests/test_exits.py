"""A child killed with SIGKILL (what the kernel's out-of-memory killer sends) is reported with the cause named."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.exits import ExitWatch


def _killed() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.send_signal(signal.SIGKILL)
    return proc.wait()


def test_a_sigkill_counted_by_the_cgroup_is_named_out_of_memory(tmp_path: Path) -> None:
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    watch = ExitWatch(events)
    code = _killed()
    events.write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")  # the kernel's count moved meanwhile
    assert watch.describe(code) == (
        "was killed by the kernel's out-of-memory killer (SIGKILL): the machine ran out of memory"
    )


def test_a_sigkill_without_evidence_still_names_the_likely_cause(tmp_path: Path) -> None:
    events = tmp_path / "memory.events"
    events.write_text("oom_kill 5\n")
    watch = ExitWatch(events)
    code = _killed()
    assert code == -signal.SIGKILL
    assert watch.describe(code) == (
        "was killed by SIGKILL, most likely the kernel's out-of-memory killer (see Troubleshooting)"
    )
    assert ExitWatch(tmp_path / "absent").describe(137).startswith("was killed by SIGKILL")  # a container's 128 + 9


def test_other_endings_are_plain() -> None:
    watch = ExitWatch(Path("/nonexistent"))
    assert watch.describe(3) == "exited with code 3"
    assert watch.describe(-signal.SIGTERM) == "was stopped by SIGTERM"


def test_stop_ends_the_whole_process_group_even_after_its_leader_is_gone(tmp_path: Path) -> None:
    """A model server's engine can outlive its API process (and ignore SIGTERM while it starts): stopping the
    launched process ends every process of its group, not only the leader."""
    import os
    import time

    from harness.backends.base import LaunchSpec
    from harness.backends.local import LocalBackend

    pid_file = tmp_path / "child.pid"
    child_code = (  # ignores SIGTERM, then says so by writing its pid
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    script = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {child_code!r}])\ntime.sleep(600)"
    log = tmp_path / "stop.log"
    handle = LocalBackend().launch(
        LaunchSpec(role="server", env_name="harness", argv=["-c", script], env=dict(os.environ), log_path=log)
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pid_file.read_text())
    started = time.monotonic()
    handle.stop(grace_s=2)
    assert handle.poll() is not None
    for _ in range(100):  # the orphan is reaped by init once killed
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {child} of the group survived stop()")
    assert time.monotonic() - started < 10


def test_an_interrupt_during_a_launch_is_raised_once_the_process_is_registered(tmp_path: Path) -> None:
    """Ctrl-C between the fork of a child and its registration would leave a process that clean-up cannot see:
    the launch holds the signal and raises it right after, so closing the backend stops the child."""
    import os
    import signal
    import time

    from harness.backends.base import LaunchSpec
    from harness.backends.local import LocalBackend, signals_deferred

    backend = LocalBackend()
    launched = []
    # Python's own Ctrl-C handler, whatever this process inherited: a test run started in the background by a
    # non-interactive shell begins with SIGINT ignored, and an ignored signal is not an interrupt to defer
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # Python has run its handler by now: held, not raised
                sleeper = ["-c", "import time; time.sleep(600)"]
                spec = LaunchSpec(role="server", env_name="harness", argv=sleeper, env={}, log_path=tmp_path / "l.log")
                launched.append(backend.launch(spec))
        assert len(launched) == 1 and launched[0].poll() is None
        backend.close()
        assert launched[0].poll() is not None
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back
    finally:
        signal.signal(signal.SIGINT, inherited)
