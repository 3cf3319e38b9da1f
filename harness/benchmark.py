"""The benchmark interface and its registry.

A benchmark lives in ``benchmarks/<name>/``: ``spec.yaml`` says what to run, and the spec's ``entrypoint``
(``benchmark.py``) defines a class decorated with :func:`register_benchmark`. Adding a benchmark touches nothing
outside its folder.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from harness.errors import SpecError
from harness.paths import benchmarks_dir
from harness.spec import BenchmarkSpec, load_spec

ErrorKind = Literal["", "infra", "timeout", "agent"]


@dataclass(frozen=True)
class Task:
    """One task of a split: ``prompt`` is what the agent sees, ``answer`` what the reward checks against."""

    id: str
    prompt: str
    answer: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulatorContext:
    """The fixed user-simulator model of a run (benchmarks with a simulated user)."""

    model: str
    client: Any
    """A shared ``openai.AsyncOpenAI`` for the simulator endpoint."""


@dataclass(frozen=True)
class RolloutContext:
    """What one rollout may use: the served policy and the sampling settings of the spec."""

    base_url: str
    model: str
    temperature: float
    max_tokens: int
    max_turns: int
    request_timeout_s: float
    seed: int
    client: Any = None
    """A shared ``openai.AsyncOpenAI`` for the policy endpoint (connection pooling, no client-side retries)."""
    resources: Any = None
    """What the benchmark's ``resources()`` yielded (e.g. a pooled tool session)."""
    simulator: SimulatorContext | None = None


@dataclass
class Episode:
    """The record of one rollout, as stored in ``rollouts.jsonl``."""

    task_id: str
    sample: int
    reward: float = 0.0
    passed: bool = False
    answer: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: int = 0
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error_kind: ErrorKind = ""
    error: str = ""
    attempts: int = 1
    info: dict[str, Any] = field(default_factory=dict)
    """Benchmark-specific record (e.g. τ²'s reward breakdown and native message list)."""


class Benchmark(Protocol):
    """What a benchmark provides to the harness."""

    name: ClassVar[str]

    def __init__(self, spec: BenchmarkSpec, folder: Path) -> None: ...

    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        """Turn dataset rows into tasks."""
        ...

    def resources(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Shared, long-lived resources for a batch of rollouts (e.g. pooled tool sessions)."""
        ...

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        """Run the agent on ``task`` against ``ctx``'s model and score it."""
        ...

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        """The chat messages a training engine starts a rollout from."""
        ...

    def training_tools(self) -> list[Callable[..., str]]:
        """Tools as plain callables for engines that run the tool loop themselves."""
        ...

    def reward_text(self, completion: str, task: Task) -> float:
        """Reward of a final assistant text for ``task``."""
        ...

    def format_ok(self, completion: str) -> bool:
        """Whether a final assistant text has the required answer format (for shaping rewards)."""
        ...

    def partial_credit(self, completion: str, task: Task) -> float:
        """A dense reward in [0, 1] for shaping (0 when the benchmark has none)."""
        ...


def message_record(message: Any) -> dict[str, Any]:
    """A JSON-friendly record of one Agent Framework message: role, text and tool calls/results."""
    record: dict[str, Any] = {"role": str(message.role), "text": message.text or ""}
    calls, results = [], []
    for content in message.contents:
        kind = getattr(content, "type", "")
        if kind == "function_call":
            calls.append({"name": content.name, "arguments": content.arguments, "call_id": content.call_id})
        elif kind == "function_result":
            results.append({"call_id": content.call_id, "result": str(content.result)[:2000]})
    if calls:
        record["tool_calls"] = calls
    if results:
        record["tool_results"] = results
    return record


_BENCHMARKS: dict[str, type[Any]] = {}


def register_benchmark(cls: type[Any]) -> type[Any]:
    """Class decorator: make a benchmark known by its ``name``."""
    _BENCHMARKS[cls.name] = cls
    return cls


@contextlib.asynccontextmanager
async def no_resources() -> AsyncIterator[None]:
    yield None


def load_module(path: Path, name: str) -> Any:
    """Import a benchmark's helper module by file path (benchmarks are folders, not packages)."""
    if name in sys.modules:
        return sys.modules[name]
    mod_spec = importlib.util.spec_from_file_location(name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise SpecError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    mod_spec.loader.exec_module(module)
    return module


def available_benchmarks(root: Path | None = None) -> list[str]:
    root = root or benchmarks_dir()
    return sorted(p.parent.name for p in root.glob("*/spec.yaml"))


def spec_path(name: str, root: Path | None = None) -> Path:
    root = root or benchmarks_dir()
    path = root / name / "spec.yaml"
    if not path.exists():
        names = available_benchmarks(root)
        hint = difflib.get_close_matches(name, names, n=1)
        did_you_mean = f"; did you mean {hint[0]!r}?" if hint else ""
        raise SpecError(f"unknown benchmark {name!r}{did_you_mean} (benchmarks: {', '.join(names) or 'none'})")
    return path


def load_benchmark(spec: BenchmarkSpec, folder: Path) -> Benchmark:
    """Import the benchmark's entrypoint by file path and instantiate the registered class."""
    entry = folder / spec.entrypoint
    if not entry.exists():
        raise SpecError(f"{folder / 'spec.yaml'}: entrypoint: file {entry.name} not found in {folder}")
    load_module(entry, f"harness_benchmark_{spec.name}")
    cls = _BENCHMARKS.get(spec.name)
    if cls is None:
        raise SpecError(f"{entry}: no class registered with @register_benchmark under name {spec.name!r}")
    bench: Benchmark = cls(spec, folder)
    return bench


def open_benchmark(name: str, profile: str | None = None) -> tuple[BenchmarkSpec, Benchmark, Path]:
    path = spec_path(name)
    spec = load_spec(path, profile)
    if spec.name != name:
        raise SpecError(f"{path}: name: {spec.name!r} does not match the folder name {name!r}")
    return spec, load_benchmark(spec, path.parent), path
