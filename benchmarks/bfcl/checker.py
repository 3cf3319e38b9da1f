"""BFCL's checker as a child process in its own environment (``.venvs/bfcl``, ``HARNESS_ENV_BFCL``).

bfcl-eval pins numpy 1.26.4 and its checker imports every provider SDK (requirements/bfcl.in), so it does not run
in the harness's environment. The child (``child.py``) runs in a mount and network namespace of its own where the
system allows (its file system read-only but a scratch folder: ``confine.py``; no network), under an address-space
limit, in that scratch folder, with an environment holding no keys of the caller; each request has a time limit,
and a child that exceeds it is killed and replaced. One child serves a process (the evaluation's rollouts and a
trainer's reward calls); requests are answered one at a time. Each line either way is a record of ``protocol.py``;
a line the child writes that is not a record of this protocol version, or not a reply to the request, is a
:class:`CheckerError` that names what is wrong in one line.

A model's reply can fail only its own sample. When the child fails on a request (an exception, a crash, the time
limit), :meth:`Checker.judged` asks it (restarted if need be) to score known-good input (``probe``): if it does, the
reply caused the failure (:class:`ReplyFault`, a failed sample with the reason); if it does not, the checker is
broken (:class:`CheckerError`, the run stops).
"""

from __future__ import annotations

import atexit
import functools
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from harness.benchmark import HarnessError, env_python, load_module, no_network_prefix, server_env

protocol = load_module(Path(__file__).with_name("protocol.py"), "harness_benchmark_bfcl_protocol")
CHILD = Path(__file__).with_name("child.py")
MEMORY_BYTES = 4 << 30
START_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 30.0
MOUNT_NS_ENV = "HARNESS_BFCL_PARENT_MOUNT_NS"  # as child.py reads it
_said_unconfined = threading.Event()  # a child without its own file-system confinement is said once a process


class CheckerError(RuntimeError):
    """The checker child failed (not a verdict on a model's output)."""


class ReplyFault(RuntimeError):
    """The checker failed on one reply and still scores known-good input: that sample fails, with this reason."""


@functools.cache
def sandbox_prefix() -> tuple[str, ...]:
    """A command prefix giving the child mount and network namespaces of its own: as root ``unshare --mount
    --net``, otherwise in a user namespace; where neither works, the network namespace alone (or nothing)."""
    unshare = shutil.which("unshare")
    if unshare is not None:
        for prefix in (
            [unshare, "--mount", "--net", "--"],
            [unshare, "--user", "--map-root-user", "--mount", "--net", "--"],
        ):
            try:
                if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                    return tuple(prefix)
            except (OSError, subprocess.TimeoutExpired):
                continue
    return no_network_prefix()


class Checker:
    """A running checker child; :meth:`prepare` and :meth:`check` are thread-safe."""

    def __init__(self, python: Path | None = None) -> None:
        self._python = python or env_python("bfcl")
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self.confinement = ""
        """What the child's own file-system confinement holds (its first line), once started."""

    def _start(self) -> subprocess.Popen[str]:
        if not self._python.exists():
            raise HarnessError(f"BFCL checker: environment not found at {self._python.parent.parent} (run `make env`)")
        self._scratch = tempfile.TemporaryDirectory(prefix="bfcl-checker-")
        cmd = [str(self._python), "-I", str(CHILD)]
        prlimit = shutil.which("prlimit")
        if prlimit:
            cmd = [prlimit, f"--as={MEMORY_BYTES}", "--core=0", "--", *cmd]
        env = {**server_env(), "HOME": self._scratch.name, MOUNT_NS_ENV: os.readlink("/proc/self/ns/mnt")}
        proc = subprocess.Popen(
            [*sandbox_prefix(), *cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self._scratch.name,
            env=env,
        )
        self._proc = proc
        hello = self._read(proc, START_TIMEOUT_S)
        if not isinstance(hello, protocol.Ready):
            self._kill()
            raise CheckerError(f"BFCL checker did not start: it wrote a {hello.reply!r} reply: {hello}")
        self.confinement = hello.confinement
        if not self.confinement.startswith("confined") and not _said_unconfined.is_set():
            _said_unconfined.set()
            print(f"BFCL checker: {self.confinement}", file=sys.stderr, flush=True)
        return proc

    def _read(self, proc: subprocess.Popen[str], timeout: float) -> protocol.Reply:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self._kill()
                raise CheckerError(f"BFCL checker gave no answer within {timeout:.0f} s (killed)")
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read()[-2000:] if proc.stderr else ""
            self._kill()
            raise CheckerError(f"BFCL checker exited: {err.strip().splitlines()[-1:] or 'no output'}")
        try:
            return protocol.read_reply(line)
        except protocol.ProtocolError as exc:
            self._kill()
            raise CheckerError(f"BFCL checker: {exc}") from None

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def request(self, req: protocol.Request, timeout: float | None = None) -> protocol.Reply:
        """The child's reply to ``req``, one of the request's own (its ``REPLIES``); :class:`CheckerError` for a
        failure the child reports and for a reply of another kind (the child is then replaced)."""
        timeout = REQUEST_TIMEOUT_S if timeout is None else timeout
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            assert proc.stdin is not None
            proc.stdin.write(protocol.line(req) + "\n")
            proc.stdin.flush()
            reply = self._read(proc, timeout)
            if not isinstance(reply, (*type(req).REPLIES, protocol.Failure)):
                self._kill()
                raise CheckerError(f"BFCL checker: a {reply.reply!r} reply to a {req.op!r} request")
        if isinstance(reply, protocol.Failure):
            raise CheckerError(f"BFCL checker: {reply.failure}")
        return reply

    def probe(self) -> protocol.ProbeResult:
        """Known-good input must score as BFCL scores it; :class:`CheckerError` when it does not."""
        reply = self.request(protocol.Probe(), timeout=START_TIMEOUT_S)
        if not reply.ok:
            raise CheckerError(f"BFCL checker: the probe failed: {reply}")
        return reply

    def judged(self, req: protocol.Request, timeout: float | None = None) -> protocol.Reply:
        """:meth:`request` for a request that carries a model's reply: a failure the reply caused is a
        :class:`ReplyFault` (the checker still scores known-good input afterwards); one it did not, a
        :class:`CheckerError`."""
        try:
            return self.request(req, timeout)
        except CheckerError as exc:
            reason = str(exc)
        try:
            self.probe()
        except CheckerError as exc:
            raise CheckerError(f"{reason}; and it fails known-good input too (the probe: {exc})") from None
        raise ReplyFault(reason)

    def prepare(self, entry: dict[str, Any], mode: str) -> protocol.Prepared:
        """The row as BFCL's loader leaves it, with the messages (and, in fc mode, the tools) its handler sends."""
        return self.request(protocol.Prepare(entry=entry, mode=mode))

    def check(self, entry: dict[str, Any], answer: Any, mode: str, output: Any) -> protocol.Verdict:
        """BFCL's verdict on one single-turn output (:meth:`judged`)."""
        return self.judged(protocol.Check(entry=entry, answer=answer, mode=mode, output=output))

    def step(self, entry: dict[str, Any], output: str) -> protocol.Stepped | protocol.Refused:
        """One step of a multi-turn conversation on this child's backends (:meth:`judged`): the reply's calls run
        and the message carrying their results, or why the reply was refused."""
        return self.judged(protocol.Step(entry=entry, output=output))

    def check_multi_turn(self, entry: dict[str, Any], answer: Any, output: list[list[str]]) -> protocol.Verdict:
        """BFCL's multi-turn verdict on a conversation's replies, per turn and step (:meth:`judged`)."""
        return self.judged(protocol.CheckMultiTurn(entry=entry, answer=answer, output=output))

    def max_steps(self) -> protocol.MaxSteps:
        """BFCL's limit of model steps in one turn."""
        return self.request(protocol.AskMaxSteps())

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.stdin is not None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self._kill()


_shared: Checker | None = None
_shared_lock = threading.Lock()


def shared_checker() -> Checker:
    """This process's checker child (started on first use, stopped at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Checker()
            atexit.register(_shared.close)
        return _shared
