"""The benchmark interface and its registry.

A benchmark lives in ``benchmarks/<name>/``: ``spec.yaml`` says what to run, and the spec's ``entrypoint``
(``benchmark.py``) defines a class decorated with :func:`register_benchmark`. Adding a benchmark touches nothing
outside its folder.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.util
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from harness.errors import HarnessError, SpecError
from harness.paths import benchmarks_dir
from harness.registry import Registry
from harness.spec.schema import BenchmarkSpec, load_spec

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


class Benchmark(ABC):
    """What a benchmark provides to the harness: its tasks and a rollout that returns a scored :class:`Episode`.

    Required: :meth:`tasks` and :meth:`rollout`. Evaluation and every training engine call the same ``rollout``:
    its ``Episode.reward`` is the task reward everywhere (pass rates use ``Episode.passed``).

    Optional hooks, each with a default, so a benchmark without tools or shaping writes none of them:

    - :meth:`resources`: long-lived resources shared by a batch of rollouts (a tool server session); none.
    - :attr:`shaping_terms` and :meth:`shaping`: named dense signals in [0, 1] that a training profile may weight
      into the training reward (``training.config.shaping: {term: weight}``); pass rates never use them.
    - :meth:`training_prompt`, :meth:`training_tools`, :meth:`score_completion`: single-turn training for the
      ``trl-grpo`` engine (TRL generates one completion per prompt and scores its text); a benchmark without them
      trains with ``trace-grpo`` or ``verl``, and a run that asks for ``trl-grpo`` stops before it starts.

    Register the class with :func:`register_benchmark`; the harness constructs it as ``cls(spec, folder)``.
    """

    name: ClassVar[str]
    shaping_terms: ClassVar[tuple[str, ...]] = ()
    """Names of the terms :meth:`shaping` returns."""

    def __init__(self, spec: BenchmarkSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder

    @abstractmethod
    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        """Turn dataset rows into tasks."""

    @abstractmethod
    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        """Run the agent on ``task`` against ``ctx``'s model (and simulator) and score it.

        An exception that an agent library raises (a malformed tool call, too many turns) is the agent's failure:
        the sample is recorded as an agent error and fails. An exception raised by the benchmark's own code (or the
        harness's) fails the run, naming its file and line; raise :class:`harness.rollout.blame.AgentFailure` to mark an
        agent's failure from the benchmark's code. See :mod:`harness.rollout.blame`."""

    def resources(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Shared, long-lived resources for a batch of rollouts; ``ctx.resources`` in :meth:`rollout`."""
        return no_resources()

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """The :attr:`shaping_terms` of a scored episode, each in [0, 1]."""
        return {}

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        """Single-turn training (``trl-grpo``): the chat messages a completion starts from."""
        raise NotImplementedError

    def training_tools(self) -> list[Callable[..., Any]]:
        """Single-turn training (``trl-grpo``): tools as plain callables, for TRL's own tool loop."""
        return []

    def score_completion(self, completion: str, task: Task) -> float:
        """Single-turn training (``trl-grpo``): the task reward of a final assistant text."""
        raise NotImplementedError

    @classmethod
    def trains_single_turn(cls) -> bool:
        """Whether the benchmark implements the single-turn hooks ``trl-grpo`` needs."""
        return cls.training_prompt is not Benchmark.training_prompt and (
            cls.score_completion is not Benchmark.score_completion
        )


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


BENCHMARKS: Registry[type[Any]] = Registry("benchmark", SpecError)
_BY_MODULE: dict[str, list[type[Any]]] = {}


def register_benchmark(cls: type[Any]) -> type[Any]:
    """Class decorator: make a :class:`Benchmark` subclass known by its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise SpecError(f"{getattr(cls, '__name__', cls)!r}: @register_benchmark needs a subclass of Benchmark")
    BENCHMARKS.register(cls)
    _BY_MODULE.setdefault(cls.__module__, []).append(cls)
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
    # one module per entrypoint file: copies of a benchmark folder (or two folders) never share a class
    module = f"harness_benchmark_{spec.name}_{hashlib.sha256(str(entry.resolve()).encode()).hexdigest()[:12]}"
    try:
        load_module(entry, module)
        cls = next((c for c in _BY_MODULE.get(module, []) if c.name == spec.name), None)
        if cls is None:
            raise SpecError(f"{entry}: no class registered with @register_benchmark under name {spec.name!r}")
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise SpecError(f"{entry}: benchmark {spec.name!r} does not implement {', '.join(missing)}")
        bench: Benchmark = cls(spec, folder)
    except ModuleNotFoundError as exc:  # the benchmark's packages are not in this environment (or image)
        sys.modules.pop(module, None)
        raise HarnessError(
            f"{entry}: benchmark {spec.name!r} imports {exc.name or exc}, which this Python environment does not have "
            f"({sys.prefix}); install the benchmark's packages here, or run it where they are"
        ) from None
    return bench


def open_benchmark(name: str, profile: str | None = None) -> tuple[BenchmarkSpec, Benchmark, Path]:
    path = spec_path(name)
    spec = load_spec(path, profile)
    if spec.name != name:
        raise SpecError(f"{path}: name: {spec.name!r} does not match the folder name {name!r}")
    return spec, load_benchmark(spec, path.parent), path
