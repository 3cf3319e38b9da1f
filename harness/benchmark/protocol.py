"""The Benchmark protocol: what a benchmark gives the harness, and the records that cross the boundary.

A benchmark is a folder ``benchmarks/<name>/`` with ``spec.yaml`` and an entrypoint (``benchmark.py``) defining one
class registered with :func:`harness.benchmark.register_benchmark`; the folder's name is the benchmark's name. Its
rollout is the one scoring path: evaluation runs it, and every training engine runs it too (or, for ``trl-grpo``,
its single-turn hooks, derived from the same ``score``).

What a benchmark can do beyond its rollout it declares by also subclassing a small capability protocol:
:class:`TrainsSingleTurn` (``training_prompt`` and ``score``: ``trl-grpo`` trains it single-turn) and
:class:`WritesNativeResults` (its own results format beside the harness's).

Who fills what (so a benchmark writes only its own part):

- :class:`Task`: the benchmark (:meth:`Benchmark.tasks`; the default reads ``id``, :attr:`Benchmark.prompt_field`
  and :attr:`Benchmark.answer_field` of each dataset row).
- :class:`RolloutContext`: the harness, every field, for each rollout; ``client`` is always set (an
  ``openai.AsyncOpenAI`` for the served policy), ``resources`` is what :meth:`Benchmark.resources` yielded (None
  without resources), ``simulator`` is set only for a spec with a ``user_simulator``.
- :class:`Episode`: the benchmark returns one per rollout with at least ``task_id``, ``reward`` and ``passed``
  (:meth:`Benchmark.passed`) and the ``messages`` (:class:`~harness.benchmark.transcript.MessageRecord`: role and
  text, plus tool calls / tool results where there are some); the harness sets ``sample`` and ``attempts``, and
  ``latency_s`` when the benchmark left it at 0; ``error_kind`` and ``error`` are the harness's when a rollout fails.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from harness.benchmark.transcript import MessageRecord
from harness.results.store.schema import INFRA_ERROR_KINDS
from harness.spec import BenchmarkSpec

ErrorKind = Literal["", "infra", "timeout", "agent"]
PASS_TOLERANCE = 1e-6
EPISODE_VERSION = 1
"""The format of an :class:`Episode` as a line of ``rollouts-<phase>.jsonl`` (its ``schema_version``)."""


class AgentFailure(Exception):
    """Raised by benchmark code when the agent failed (an answer it cannot score): a failed sample, reward 0."""


@dataclass(frozen=True)
class Task:
    """One task of a split: ``prompt`` is what the agent sees, ``answer`` what the score checks against."""

    id: str
    prompt: str
    answer: str
    data: dict[str, Any] = field(default_factory=dict)
    """The whole dataset row."""


@dataclass(frozen=True)
class SimulatorContext:
    """The fixed user-simulator model of a run (benchmarks with a simulated user)."""

    model: str
    client: Any
    """A shared ``openai.AsyncOpenAI`` for the simulator endpoint."""


@dataclass(frozen=True)
class RolloutContext:
    """What one rollout may use: the served policy and the spec's sampling settings (all set by the harness)."""

    base_url: str
    model: str
    temperature: float
    max_tokens: int
    """Most tokens per model reply (``evaluation.max_tokens``)."""
    max_turns: int
    """Most model calls in one episode (``agent.max_turns``)."""
    request_timeout_s: float
    seed: int
    """The sampling seed of this rollout (derived from the run's seed and the sample index)."""
    client: Any = None
    """A shared ``openai.AsyncOpenAI`` for the policy endpoint (connection pooling, no client-side retries)."""
    resources: Any = None
    """What the benchmark's ``resources()`` yielded (e.g. a pooled tool session); None without resources."""
    simulator: SimulatorContext | None = None
    """The run's user simulator, for a spec with ``user_simulator``; None otherwise."""


class Episode(BaseModel):
    """The record of one rollout, as stored in ``rollouts-<phase>.jsonl`` (one JSON line each, read back through
    :mod:`harness.rollout.records`). Mutable: the harness fills its fields in after the rollout."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = EPISODE_VERSION
    """The record's format (:data:`EPISODE_VERSION`); a line written before it was recorded reads as version 1."""
    task_id: str
    sample: int = 0
    """Which sample of the task (set by the harness)."""
    reward: float = 0.0
    """The task reward, unshaped: what evaluation scores and training optimises."""
    passed: bool = False
    answer: str | None = None
    """The answer extracted from the reply, if the benchmark has such a notion."""
    messages: list[MessageRecord] = Field(default_factory=list)
    """The conversation: role and text of each message, with its tool calls / tool results where made."""
    tool_calls: int = 0
    turns: int = 0
    """Model replies in the episode."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error_kind: ErrorKind = ""
    error: str = ""
    attempts: int = 1
    info: dict[str, Any] = Field(default_factory=dict)
    """Benchmark-specific record (e.g. τ²'s reward breakdown and native message list)."""

    @property
    def final_text(self) -> str:
        """The text of the last message (the agent's final reply)."""
        return self.messages[-1].text if self.messages else ""

    @property
    def is_infra(self) -> bool:
        return self.error_kind in INFRA_ERROR_KINDS


class Benchmark(ABC):
    """What a benchmark provides: its tasks and a rollout that returns a scored :class:`Episode`.

    Required: :meth:`rollout` (:class:`~harness.benchmark.single_turn.SingleTurnBenchmark` derives it from
    ``prompt`` and ``score``). Optional hooks, each with a default:

    - :meth:`tasks`: dataset rows to tasks (default: ``id``, :attr:`prompt_field`, :attr:`answer_field`);
    - :meth:`passed`: whether a reward passes (default: reward 1);
    - :meth:`resources`: long-lived resources shared by a batch of rollouts (a tool server session); none;
    - :attr:`shaping_terms` and :meth:`shaping`: named dense signals in [0, 1] that a training profile may weight
      into the training reward (``training.config.shaping: {term: weight}``); pass rates never use them.

    Capabilities, declared by also subclassing them: :class:`TrainsSingleTurn` (``score`` and ``training_prompt``,
    what ``trl-grpo`` trains with) and :class:`WritesNativeResults`.
    """

    name: str
    """The benchmark's name: its folder's (the spec's ``name``)."""
    shaping_terms: ClassVar[tuple[str, ...]] = ()
    """Names of the terms :meth:`shaping` returns."""
    prompt_field: ClassVar[str] = "prompt"
    """The dataset column the default :meth:`tasks` reads the prompt from."""
    answer_field: ClassVar[str] = "answer"
    """The dataset column the default :meth:`tasks` reads the answer from."""

    def __init__(self, spec: BenchmarkSpec, folder: Path) -> None:
        self.spec = spec
        self.folder = folder
        self.name = spec.name

    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        """Dataset rows to tasks."""
        return [
            Task(id=str(r["id"]), prompt=str(r[self.prompt_field]), answer=str(r[self.answer_field]), data=dict(r))
            for r in rows
        ]

    @abstractmethod
    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        """Run the agent on ``task`` against ``ctx``'s model (and simulator) and score it.

        An exception that an agent library raises (a malformed tool call, too many turns) is the agent's failure:
        the sample is recorded as an agent error and fails. An exception raised by the benchmark's own code (or the
        harness's) fails the run, naming its file and line; raise :class:`AgentFailure` to
        mark an agent's failure from the benchmark's code."""

    def passed(self, reward: float) -> bool:
        """Whether a task reward is a pass: the one definition every phase and engine uses."""
        return reward >= 1.0 - PASS_TOLERANCE

    def resources(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """Shared, long-lived resources for a batch of rollouts; ``ctx.resources`` in :meth:`rollout`."""
        return no_resources()

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """The :attr:`shaping_terms` of a scored episode, each in [0, 1]."""
        return {}


@runtime_checkable
class TrainsSingleTurn(Protocol):
    """Capability: ``trl-grpo`` trains the benchmark single-turn, on completions of :meth:`training_prompt` scored
    by :meth:`score` (every :class:`~harness.benchmark.single_turn.SingleTurnBenchmark` has it)."""

    @abstractmethod
    def score(self, text: str, task: Task) -> float:
        """The task reward of a final reply ``text`` (single-turn training scores its completions with it)."""

    @abstractmethod
    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        """The chat messages a completion starts from."""

    def training_tools(self) -> list[Callable[..., Any]]:
        """Tools as plain callables, for TRL's own tool loop (default: none)."""
        return []


@runtime_checkable
class WritesNativeResults(Protocol):
    """Capability: the benchmark writes its own results format beside the harness's (τ²'s ``Results`` JSON)."""

    @abstractmethod
    def write_native_results(self, episodes: Sequence[Episode], path: Path, info: dict[str, Any]) -> None:
        """Write the benchmark's own results format for one evaluation to ``path``."""


@contextlib.asynccontextmanager
async def no_resources() -> AsyncIterator[None]:
    yield None
