"""Transient model-server errors are retried with bounded backoff; what still fails is an infrastructure error, not
a 0 reward; the summary counts both.

A real vLLM server serves the smoke model; a real HTTP proxy in front of it injects faults per task (503 and 500
answers, dropped connections, a request held past the client timeout, a task whose requests always fail), and a
second evaluation starts before anything listens on its port (connection refused). The evaluation is the
harness's own (``harness.rollout.evaluate`` with the math agent and the real calculator).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.assets.data import load_split
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import load_benchmark
from harness.run.state import summarize
from harness.serving.server import free_port, serve
from harness.spec import load_spec
from support import MATH_SPEC
from support_reliability import FIGURES, FaultPlan, FaultProxy

pytestmark = pytest.mark.slow

RETRIES = 3
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def server(smoke_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list]]:
    spec = load_spec(MATH_SPEC)
    rows, _ = load_split(spec.dataset, "test")
    bench = load_benchmark(spec, MATH_SPEC.parent)
    tasks = bench.tasks(rows)[:5]
    log = tmp_path_factory.mktemp("retries") / "server.log"
    with serve(smoke_model, spec.model.name, spec.serving, log) as served:
        yield served.endpoint.base_url, [bench, tasks, spec]


def _settings(base_url: str, model: str, retries: int = RETRIES) -> EvalSettings:
    return EvalSettings(
        base_url=base_url,
        model=model,
        temperature=0.0,
        max_tokens=16,
        max_turns=2,
        concurrency=5,
        samples_per_task=1,
        request_timeout_s=TIMEOUT_S,
        retries=retries,
        seed=0,
        backoff_s=0.5,
    )


def test_transient_errors_are_retried_and_persistent_ones_are_infra(server: tuple[str, list], tmp_path: Path) -> None:
    base_url, (bench, tasks, spec) = server
    plans = [
        FaultPlan(match=tasks[0].prompt, status_503=2),
        FaultPlan(match=tasks[1].prompt, status_500=1, drop=1),
        FaultPlan(match=tasks[2].prompt, always_503=True),
        FaultPlan(match=tasks[3].prompt, hang=1, hang_s=TIMEOUT_S + 3),
        FaultPlan(match=tasks[4].prompt),  # no fault: the control
    ]
    with FaultProxy(base_url, plans) as proxy:
        started = time.monotonic()
        episodes = asyncio.run(
            evaluate(bench, tasks, _settings(proxy.base_url, spec.model.name), tmp_path / "rollouts.jsonl")
        )
        elapsed = time.monotonic() - started
    by_task = {e.task_id: e for e in episodes}
    e0, e1, e2, e3, e4 = (by_task[t.id] for t in tasks)
    FIGURES.fault("model-server error (503, 500, dropped, held past the timeout)", sum(p.faults for p in plans))
    # retried until the server answered (an agent error, the model's own failure, is scored and never retried)
    assert (e0.attempts, e1.attempts, e3.attempts, e4.attempts) == (3, 3, 2, 1), (e0, e1, e3, e4)
    assert all(e.error_kind in ("", "agent") for e in (e0, e1, e3, e4)), [e.error for e in (e0, e1, e3, e4)]
    # the task that never gets an answer: bounded attempts, an infrastructure error, not a wrong answer
    assert e2.attempts == RETRIES + 1 and plans[2].seen == RETRIES + 1
    assert e2.error_kind == "infra" and "503" in e2.error and not e2.passed
    summary = summarize(episodes)
    assert summary.infra_errors == 1 and summary.n_scored == 4
    assert summary.pass_rate == sum(e.passed for e in (e0, e1, e3, e4)) / 4  # infra errors are not in the rate
    # backoff is bounded: 0.5 s doubling with jitter, at most 0.75 + 1.5 + 3 s for the failing task
    assert elapsed < TIMEOUT_S + 3 + 60, elapsed
    # a re-run of the evaluation into the same file keeps the finished records and retries only the infra one
    with FaultProxy(base_url, [FaultPlan()]) as proxy:
        again = asyncio.run(
            evaluate(bench, tasks, _settings(proxy.base_url, spec.model.name), tmp_path / "rollouts.jsonl")
        )
        assert proxy.plans[0].seen >= 1 and proxy.forwarded >= 1
    assert summarize(again).infra_errors == 0
    assert [e.messages for e in again if e.task_id != tasks[2].id] == [
        e.messages for e in episodes if e.task_id != tasks[2].id
    ]


def test_connection_refused_until_the_server_comes_up(server: tuple[str, list], tmp_path: Path) -> None:
    base_url, (bench, tasks, spec) = server
    port = free_port()
    holder: dict[str, FaultProxy] = {}

    def come_up() -> None:
        holder["proxy"] = FaultProxy(base_url, [FaultPlan()], port=port).__enter__()

    timer = threading.Timer(3.0, come_up)  # after the first attempts (the calculator starts first, ~1 s)
    timer.start()
    try:
        episodes = asyncio.run(
            evaluate(
                bench, tasks[:2], _settings(f"http://127.0.0.1:{port}/v1", spec.model.name, 6), tmp_path / "r.jsonl"
            )
        )
    finally:
        timer.join()
        holder["proxy"].__exit__()
    FIGURES.fault("connection refused")
    assert all(e.error_kind in ("", "agent") for e in episodes), [e.error for e in episodes]
    assert all(e.attempts >= 2 for e in episodes), [e.attempts for e in episodes]
