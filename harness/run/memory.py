"""Peak memory of a process tree, sampled in a background thread.

The figure is the largest sum, over one sample, of the proportional set size (PSS) of every process in the tree:
shared pages (torch's libraries in three model-server processes) are counted once, split between their users, so
the sum is what the tree costs the machine. The resident set (RSS) sum, which counts shared pages in every process,
is kept beside it. Each sample also notes the largest processes, so a peak names who holds the memory.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil

from harness.results.store.manifest import ProcessMemory, ResourcesRecord

INTERVAL_S = 0.5


def describe(proc: psutil.Process) -> str:
    """A short name for a process: the module or script it runs (``vllm.entrypoints.openai.api_server``)."""
    try:
        argv = [a for a in proc.cmdline() if a]  # a retitled process (vLLM's "VLLM::Worker") pads with empty strings
    except (psutil.Error, OSError):
        return "?"
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m":
            return argv[i + 1]
        if arg == "-c":
            return "python -c " + argv[i + 1].split(";")[-1].strip()[:40]
    for arg in argv[1:]:
        if not arg.startswith("-"):
            return arg.rsplit("/", 1)[-1]
    return (argv[0].rsplit("/", 1)[-1] if argv else proc.name()) or "?"


def _memory(proc: psutil.Process) -> tuple[int, int]:
    """(PSS, RSS) in bytes; PSS falls back to RSS where the kernel does not report it."""
    try:
        full = proc.memory_full_info()
        return int(getattr(full, "pss", full.rss)), int(full.rss)
    except psutil.AccessDenied:
        rss = int(proc.memory_info().rss)
        return rss, rss


@dataclass
class Sample:
    at_s: float
    pss: int
    rss: int
    processes: int
    top: list[tuple[str, int]]
    """The largest processes of the sample: (name, PSS bytes), largest first."""


@dataclass
class TreeSampler:
    """Samples ``pid`` and its descendants every ``interval_s`` until :meth:`stop`; keeps the peak sample."""

    pid: int
    interval_s: float = INTERVAL_S
    label: str = ""
    peak: Sample | None = None
    peak_label: str = ""
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _started: float = 0.0

    def sample(self) -> Sample | None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        rows: list[tuple[str, int, int]] = []
        for proc in procs:
            try:
                pss, rss = _memory(proc)
            except (psutil.Error, OSError):
                continue  # exited between the listing and the read
            rows.append((describe(proc), pss, rss))
        rows.sort(key=lambda r: -r[1])
        return Sample(
            at_s=round(time.monotonic() - self._started, 1),
            pss=sum(r[1] for r in rows),
            rss=sum(r[2] for r in rows),
            processes=len(rows),
            top=[(name, pss) for name, pss, _ in rows[:4]],
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            s = self.sample()
            if s is not None:
                self.samples += 1
                if self.peak is None or s.pss > self.peak.pss:
                    self.peak, self.peak_label = s, self.label
            self._stop.wait(self.interval_s)

    def start(self) -> TreeSampler:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def record(self) -> ResourcesRecord | None:
        """The peak as a manifest entry (bytes; the phase that was running; the largest processes then); None when
        nothing was sampled."""
        if self.peak is None:
            return None
        return ResourcesRecord(
            peak_pss_bytes=self.peak.pss,
            peak_rss_bytes=self.peak.rss,
            peak_phase=self.peak_label,
            peak_at_s=self.peak.at_s,
            peak_processes=self.peak.processes,
            peak_top=[ProcessMemory(process=name, pss_bytes=pss) for name, pss in self.peak.top],
            interval_s=self.interval_s,
            samples=self.samples,
            scope="the harness process and its descendants (containers are not counted)",
        )
