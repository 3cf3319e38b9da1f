"""Concurrent rollouts against a served policy, streamed to ``rollouts.jsonl``.

Rollouts run on one event loop with at most ``evaluation.concurrency`` in flight. Infrastructure failures
(connection refused, 5xx, timeouts) are retried with exponential backoff up to ``evaluation.retries`` times; a
rollout that still fails is recorded with ``error_kind="infra"`` (excluded from pass rates), never as a 0 reward.
Any other exception inside the agent is the model's failure: reward 0, ``error_kind="agent"``.

Records already in the output file (same task and sample) are reused, so an interrupted evaluation resumes.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness import timing
from harness.benchmark.protocol import Benchmark, Episode, ErrorKind, RolloutContext, SimulatorContext, Task
from harness.rollout.blame import blame, code_error
from harness.rollout.records import finished, to_line
from harness.rollout.toolcalls import JsonToolCallTransport
from harness.rollout.tracing import TraceStore, TracingTransport, rollout_scope


@dataclass(frozen=True)
class EvalSettings:
    base_url: str
    model: str
    temperature: float
    max_tokens: int
    max_turns: int
    concurrency: int
    samples_per_task: int
    request_timeout_s: float
    retries: int
    seed: int
    api_key: str = "EMPTY"
    backoff_s: float = 1.0
    simulator_url: str | None = None
    """OpenAI-compatible endpoint of the run's user simulator (benchmarks with a simulated user)."""
    simulator_model: str = ""
    simulator_api_key: str = "EMPTY"
    trace: TraceStore | None = None
    """When set, the policy's calls are traced token by token per rollout (training engines)."""
    request_log: list[dict[str, Any]] | None = None
    """When set, every request body sent to the model server is appended here (used by bench/eval_throughput)."""
    json_tool_calls: bool = False
    """Read a reply that is only a JSON call to an offered tool as that call (serving.json_tool_calls)."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    for e in list(seen):
        inner = getattr(e, "inner_exception", None)
        if isinstance(inner, BaseException) and inner not in seen:
            seen.append(inner)
    return seen


def classify_error(exc: BaseException) -> ErrorKind:
    """``infra`` for server/transport failures, ``timeout`` for timeouts, ``agent`` for everything else."""
    import openai

    for e in _chain(exc):
        if isinstance(e, openai.APITimeoutError | httpx.TimeoutException | asyncio.TimeoutError | TimeoutError):
            return "timeout"
        if isinstance(e, openai.APIConnectionError | httpx.TransportError | ConnectionError):
            return "infra"
        if isinstance(e, openai.InternalServerError):
            return "infra"
        if isinstance(e, openai.APIStatusError) and e.status_code in (408, 429, 502, 503, 504):
            return "infra"
    return "agent"


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.replace("\n", " ")[:500]


async def _run_one(
    bench: Benchmark,
    task: Task,
    sample: int,
    settings: EvalSettings,
    client: Any,
    resources: Any,
    simulator: SimulatorContext | None = None,
    error_log: Path | None = None,
) -> Episode:
    attempts = 0
    last: Episode | None = None
    while True:
        attempts += 1
        ctx = RolloutContext(
            base_url=settings.base_url,
            model=settings.model,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_turns=settings.max_turns,
            request_timeout_s=settings.request_timeout_s,
            seed=settings.seed * 1_000_003 + sample,
            client=client,
            resources=resources,
            simulator=simulator,
        )
        started = time.perf_counter()
        if settings.trace is not None:
            settings.trace.reset((task.id, sample))
        try:
            with rollout_scope(task.id, sample):
                episode = await bench.rollout(task, ctx)
            episode.sample = sample
            episode.attempts = attempts
            episode.latency_s = episode.latency_s or time.perf_counter() - started
            return episode
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            kind = classify_error(exc)
            if kind == "agent" and blame(exc, bench.folder) == "benchmark":
                raise code_error(exc, bench.folder, f"task {task.id}, sample {sample}", error_log) from exc
            last = Episode(
                task_id=task.id,
                sample=sample,
                error_kind=kind,
                error=_one_line(exc),
                latency_s=time.perf_counter() - started,
                attempts=attempts,
            )
            if kind == "agent" or attempts > settings.retries:
                return last
            delay = settings.backoff_s * (2 ** (attempts - 1)) * (0.5 + random.random())  # noqa: S311
            await asyncio.sleep(min(delay, 30.0))


async def evaluate(
    bench: Benchmark,
    tasks: Sequence[Task],
    settings: EvalSettings,
    out_path: Path,
    on_done: Callable[[Episode], None] | None = None,
    ready: Callable[[], Awaitable[None]] | None = None,
) -> list[Episode]:
    """Run every (task, sample) once, ``settings.concurrency`` at a time; append each record as it finishes.

    ``ready`` is awaited after the benchmark's resources (e.g. the tool server) are up and before the first
    rollout: the model server can finish starting meanwhile.
    """
    import openai

    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = finished(out_path)
    todo = [(t, s) for t in tasks for s in range(settings.samples_per_task) if (t.id, s) not in done]
    results: dict[tuple[str, int], Episode] = dict(done)
    for ep in done.values():
        if on_done is not None:
            on_done(ep)
    sem = asyncio.Semaphore(settings.concurrency)
    hooks: dict[str, list[Any]] = {}
    if settings.request_log is not None:
        log = settings.request_log

        async def record(request: httpx.Request) -> None:
            if request.url.path.endswith("/chat/completions"):
                log.append(json.loads(request.content))

        hooks["request"] = [record]
    if timing.enabled():
        first = [True]

        async def mark_first(request: httpx.Request) -> None:
            if first[0] and request.url.path.endswith("/chat/completions"):
                first[0] = False
                timing.mark("first_request")

        hooks.setdefault("request", []).append(mark_first)
    limits = httpx.Limits(max_connections=settings.concurrency * 2)
    transport: httpx.AsyncBaseTransport | None = None
    if settings.json_tool_calls:
        transport = JsonToolCallTransport(httpx.AsyncHTTPTransport(limits=limits))
    if settings.trace is not None:
        transport = TracingTransport(settings.trace, transport or httpx.AsyncHTTPTransport(limits=limits))
    client = openai.AsyncOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout=settings.request_timeout_s,
        max_retries=0,
        http_client=httpx.AsyncClient(
            limits=limits, timeout=settings.request_timeout_s, event_hooks=hooks, transport=transport
        ),
    )
    simulator = None
    if settings.simulator_url:
        simulator = SimulatorContext(
            model=settings.simulator_model,
            client=openai.AsyncOpenAI(
                base_url=settings.simulator_url,
                api_key=settings.simulator_api_key,
                timeout=settings.request_timeout_s,
                max_retries=0,
            ),
        )
    lock = asyncio.Lock()
    error_log = out_path.with_name(f"{out_path.stem}-benchmark-error.txt")
    with out_path.open("a", encoding="utf-8") as out:

        async def worker(task: Task, sample: int, resources: Any) -> None:
            async with sem:
                ep = await _run_one(bench, task, sample, settings, client, resources, simulator, error_log)
            line = to_line(ep)
            async with lock:
                out.write(line + "\n")
                out.flush()
            results[(task.id, sample)] = ep
            if on_done is not None:
                on_done(ep)

        try:
            async with bench.resources() as resources:
                timing.mark("tools_ready")
                if ready is not None:
                    await ready()
                workers = [asyncio.ensure_future(worker(t, s, resources)) for t, s in todo]
                try:
                    await asyncio.gather(*workers)
                except BaseException:  # a failed run (benchmark code raised) or an interrupt: stop the others
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
                    raise
        finally:
            await client.close()
            if simulator is not None:
                await simulator.client.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    return sorted(results.values(), key=lambda e: (order.get(e.task_id, 1 << 30), e.sample))
