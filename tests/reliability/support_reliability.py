"""Helpers of the reliability tests: real HTTP servers in threads (a scripted model, a faulty proxy in front of a
real one), a watcher of a process's descendants, the harness CLI as a child process, and a grep of every output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil

from support import REPO, copy_math_benchmark

# --- HTTP servers in threads --------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *_: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner.handle(self)

    def do_POST(self) -> None:
        self.server.owner.handle(self)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: Any


class ThreadServer:
    """A real HTTP server on 127.0.0.1 in a background thread; subclasses implement ``handle``."""

    def __init__(self, port: int = 0) -> None:
        self.httpd = _Server(("127.0.0.1", port), _Handler)
        self.httpd.owner = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def read_body(request: BaseHTTPRequestHandler) -> bytes:
    length = int(request.headers.get("Content-Length") or 0)
    return request.rfile.read(length) if length else b""


def send_json(request: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    body = json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(body)))
    request.end_headers()
    request.wfile.write(body)


def chat_completion(model: str, content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ScriptedModel(ThreadServer):
    """An OpenAI-compatible chat server whose replies a function picks from the conversation (the messages)."""

    def __init__(self, reply: Callable[[list[dict[str, Any]]], dict[str, Any]], model: str = "scripted") -> None:
        super().__init__()
        self.reply = reply
        self.model = model
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        if request.command == "GET":
            send_json(request, 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
            return
        body = json.loads(read_body(request))
        self.requests.append(body)
        send_json(request, 200, self.reply(body["messages"]))


@dataclass
class FaultPlan:
    """What a :class:`FaultProxy` does to the requests whose body contains ``match`` (every request when "")."""

    match: str = ""
    status_503: int = 0
    """Answer this many matching requests with 503 first."""
    status_500: int = 0
    drop: int = 0
    """Then close this many connections without an answer."""
    hang_s: float = 0.0
    hang: int = 0
    """Then hold this many requests for ``hang_s`` seconds before forwarding (client timeouts)."""
    always_503: bool = False
    seen: int = 0
    faults: int = 0


class FaultProxy(ThreadServer):
    """A real HTTP proxy in front of a real model server that injects transient faults by plan."""

    def __init__(self, upstream: str, plans: list[FaultPlan], port: int = 0) -> None:
        super().__init__(port)
        self.upstream = upstream.rstrip("/")
        self.plans = plans
        self.forwarded = 0
        self.lock = threading.Lock()
        self.client = httpx.Client(timeout=600)

    def _fault(self, body: bytes) -> tuple[str, FaultPlan | None]:
        text = body.decode("utf-8", "replace")
        with self.lock:
            for plan in self.plans:
                if plan.match and plan.match not in text:
                    continue
                plan.seen += 1
                n = plan.seen
                for kind, count in (("503", plan.status_503), ("500", plan.status_500), ("drop", plan.drop)):
                    if n <= count:
                        plan.faults += 1
                        return kind, plan
                    n -= count
                if plan.always_503:
                    plan.faults += 1
                    return "503", plan
                if n <= plan.hang:
                    plan.faults += 1
                    return "hang", plan
                return "", plan
        return "", None

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = read_body(request) if request.command == "POST" else b""
        kind, plan = self._fault(body) if request.command == "POST" else ("", None)
        if kind in ("503", "500"):
            send_json(request, int(kind), {"error": {"message": f"injected {kind}", "type": "server_error"}})
            return
        if kind == "drop":
            request.close_connection = True
            request.connection.close()
            return
        if kind == "hang" and plan is not None:
            time.sleep(plan.hang_s)
        upstream = self.client.request(
            request.command,
            self.upstream + request.path.removeprefix("/v1"),
            content=body or None,
            headers={"Content-Type": "application/json"},
        )
        with self.lock:
            self.forwarded += 1
        request.send_response(upstream.status_code)
        request.send_header("Content-Type", upstream.headers.get("content-type", "application/json"))
        request.send_header("Content-Length", str(len(upstream.content)))
        request.end_headers()
        request.wfile.write(upstream.content)


# --- processes ------------------------------------------------------------------------------------------------------


@dataclass
class Tree:
    """The descendants of a process seen so far (pid -> (create time, command line)), watched in a thread."""

    root: int
    seen: dict[int, tuple[float, str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def scan(self) -> None:
        try:
            children = psutil.Process(self.root).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                # refreshed while it runs: a child seen between its fork and its exec still shows the parent's
                # command line (then a trainer would never be found by its module name)
                self.seen[child.pid] = (child.create_time(), " ".join(child.cmdline()))
            except psutil.Error:
                continue

    def watch(self, every_s: float = 0.2) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                self.scan()
                time.sleep(every_s)

        threading.Thread(target=loop, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def alive(self) -> dict[int, str]:
        """Descendants seen so far that still run (the same process: pid and create time match)."""
        out = {}
        for pid, (created, cmd) in self.seen.items():
            try:
                proc = psutil.Process(pid)
                if abs(proc.create_time() - created) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                    out[pid] = cmd
            except psutil.Error:
                continue
        return out

    def having(self, text: str) -> dict[int, str]:
        return {pid: cmd for pid, cmd in self.alive().items() if text in cmd}


@dataclass
class HarnessProcess:
    """``harness`` as a child process (its own session, like a user's), with its output collected."""

    proc: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    tree: Tree | None = None

    @property
    def text(self) -> str:
        return "".join(self.output)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # the reader thread drains the pipe
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=30)
        if self.tree is not None:
            for pid in self.tree.alive():
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            self.tree.stop()


def start_harness(args: list[str], env: dict[str, str]) -> HarnessProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=REPO,
        start_new_session=True,
    )
    hp = HarnessProcess(proc)
    assert proc.stdout is not None
    stream = proc.stdout
    threading.Thread(target=lambda: hp.output.extend(iter(stream.readline, "")), daemon=True).start()
    hp.tree = Tree(proc.pid)
    hp.tree.watch()
    return hp


@contextmanager
def harness(args: list[str], env: dict[str, str]) -> Iterator[HarnessProcess]:
    hp = start_harness(args, env)
    try:
        yield hp
    finally:
        hp.kill()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, every_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def interrupt_and_time(hp: HarnessProcess, signum: int, timeout: float = 180) -> tuple[int, float, float]:
    """Send ``signum`` to the harness. Returns its exit code, the seconds until every child that ran at the signal
    (model server, trainer, calculator) was gone, and the seconds until the harness itself had exited (after
    recording the run); every descendant, also those started while it recorded, must be gone then too."""
    assert hp.tree is not None
    hp.tree.scan()
    running = set(hp.tree.alive())
    start = time.monotonic()
    hp.proc.send_signal(signum)
    try:
        wait_for(lambda: not running & set(hp.tree.alive()), timeout, "the children to end", 0.05)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{stuck_report(hp, running)}") from None
    children_s = time.monotonic() - start
    code = hp.proc.wait(timeout=timeout)
    exit_s = time.monotonic() - start
    wait_for(lambda: not hp.tree.alive(), 30, f"every descendant to end: {hp.tree.alive()}", 0.1)
    return code, children_s, exit_s


def stuck_report(hp: HarnessProcess, running: set[int]) -> str:
    """What a test that waited in vain needs to say: the children still running, and the harness's own stacks
    (SIGUSR1 makes it print every thread's stack, see harness.cli) with the end of its output."""
    assert hp.tree is not None
    left = {pid: cmd for pid, cmd in hp.tree.alive().items() if pid in running}
    if hp.proc.poll() is None:
        with contextlib.suppress(OSError):
            hp.proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
    state = "still running" if hp.proc.poll() is None else f"exited {hp.proc.returncode}"
    children = "\n".join(f"  {pid}: {cmd[:200]}" for pid, cmd in left.items())
    return f"children left:\n{children}\nharness {state}; its output ends:\n{hp.text[-6000:]}"


def run_env(tmp_path: Path, overrides: dict[str, Any], **extra: str) -> dict[str, str]:
    """The environment of a harness run on a test-local copy of the math benchmark (smoke profile overridden)."""
    if not (tmp_path / "benchmarks" / "math").exists():
        copy_math_benchmark(tmp_path / "benchmarks", overrides)
    return dict(
        os.environ,
        HARNESS_BENCHMARKS=str(tmp_path / "benchmarks"),
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        PYTHONPATH=str(REPO),
        **extra,
    )


def grep_files(root: Path, needle: str) -> list[Path]:
    """Files under ``root`` whose bytes contain ``needle``."""
    raw = needle.encode()
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                with path.open("rb") as f:
                    tail = b""
                    while chunk := f.read(1 << 24):
                        if raw in tail + chunk:
                            hits.append(path)
                            break
                        tail = chunk[-len(raw) :]
            except OSError:
                continue
    return hits


# --- figures --------------------------------------------------------------------------------------------------------


class Figures:
    """Counts the suite reports at the end of a test session (see conftest.py)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.cleanups: dict[str, str] = {}
        self.worst = 0.0

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def fault(self, kind: str, n: int = 1) -> None:
        self.add("faults injected", n)
        self.faults[kind] = self.faults.get(kind, 0) + n

    def cleanup(self, what: str, children_s: float, exit_s: float) -> None:
        self.cleanups[what] = f"children gone in {children_s:.1f} s, harness exited in {exit_s:.1f} s"
        self.worst = max(self.worst, children_s)

    def lines(self) -> list[str]:
        out = []
        for key, value in self.counts.items():
            out.append(f"{key}: {value}")
            if key == "faults injected":
                out += [f"  {k}: {v}" for k, v in self.faults.items()]
        if self.cleanups:
            out.append(f"clean-up after a signal (children gone within {self.worst:.1f} s at most):")
            out += [f"  {k}: {v}" for k, v in self.cleanups.items()]
        return out


FIGURES = Figures()
