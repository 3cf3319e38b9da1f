"""An exception in a rollout: the agent's failure (a failed sample) or a bug in the benchmark's code (a failed run,
naming the file and line)? Real benchmark code loaded the way the harness loads it, a real third-party module on
the import path, the real evaluation loop and the verl engine's rollout path."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.benchmark import AgentFailure
from harness.benchmark.protocol import Task
from harness.engines.verl.rollout import BudgetExhausted, Trajectory, traced_rollout
from harness.errors import RunFailure, SpecError
from harness.rollout.blame import BenchmarkCodeError, blame, raise_site
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import load_benchmark
from harness.spec import load_spec
from support import MATH_SPEC

BENCHMARK = """
import asyncio
import contextlib
import json

from fakeagentlib import run_agent

from harness.benchmark import AgentFailure, Benchmark, Episode, SpecError, register_benchmark

EVENTS = []  # what the resources and the slow rollouts saw, in order


@register_benchmark
class Broken(Benchmark):
    name = "broken"

    def tasks(self, rows):
        return []

    @contextlib.asynccontextmanager
    async def resources(self):
        EVENTS.append("resources open")
        try:
            yield None
        finally:
            EVENTS.append("resources closed")

    async def rollout(self, task, ctx):
        if task.id.startswith("slow"):
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                EVENTS.append(f"{task.id} cancelled")
                raise
            return Episode(task_id=task.id, reward=1.0, passed=True)
        if task.id == "ok":
            return Episode(task_id=task.id, reward=1.0, passed=True)
        if task.id == "library":  # the agent library gives up on the model's output
            run_agent("not a tool call")
        if task.id == "agent-failure":
            raise AgentFailure("no answer to score")
        if task.id == "stdlib":  # benchmark code calls the standard library wrongly
            json.loads("{")
        if task.id == "spec":
            raise SpecError("broken: the run lacks something the benchmark needs")
        if task.id == "record":  # a bug: the harness's record takes the answer as text
            return Episode(task_id=task.id, answer=5)
        return Episode(task_id=task.id, reward={}["score"])  # a bug: the benchmark's own KeyError
"""

LIBRARY = """
class ToolCallError(ValueError):
    pass


def run_agent(text):
    raise ToolCallError(f"malformed tool call: {text!r}")
"""


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "fakeagentlib.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(site))
    folder = tmp_path / "benchmarks" / "broken"
    shutil.copytree(MATH_SPEC.parent, folder)
    spec = (folder / "spec.yaml").read_text()
    (folder / "spec.yaml").write_text(spec.replace("name: math\n", "name: broken\n", 1))
    (folder / "benchmark.py").write_text(textwrap.dedent(BENCHMARK))
    return load_benchmark(load_spec(folder / "spec.yaml"), folder)


def settings() -> EvalSettings:
    return EvalSettings(
        base_url="http://127.0.0.1:9/v1",  # never called: these rollouts make no request
        model="policy",
        temperature=0.0,
        max_tokens=16,
        max_turns=1,
        concurrency=4,
        samples_per_task=1,
        request_timeout_s=5.0,
        retries=0,
        seed=0,
    )


def run(bench: object, ids: list[str], out: Path) -> list[object]:
    tasks = [Task(i, "p", "a") for i in ids]
    return asyncio.run(evaluate(bench, tasks, settings(), out))  # type: ignore[arg-type]


def test_a_library_raising_on_the_agents_behalf_fails_the_sample(broken: object, tmp_path: Path) -> None:
    episodes = run(broken, ["ok", "library", "agent-failure"], tmp_path / "rollouts.jsonl")
    kinds = {e.task_id: (e.error_kind, e.passed, e.reward) for e in episodes}  # type: ignore[attr-defined]
    assert kinds == {"ok": ("", True, 1.0), "library": ("agent", False, 0.0), "agent-failure": ("agent", False, 0.0)}
    library = next(e for e in episodes if e.task_id == "library")  # type: ignore[attr-defined]
    assert library.error.startswith("ToolCallError: malformed tool call")  # type: ignore[attr-defined]
    assert len((tmp_path / "rollouts.jsonl").read_text().splitlines()) == 3


def line_of(code: str) -> int:
    return next(i for i, text in enumerate(BENCHMARK.splitlines(), 1) if code in text)


@pytest.mark.parametrize(
    ("task", "error", "code"),
    [
        ("bug", "KeyError: 'score'", '{}["score"]'),
        ("stdlib", "JSONDecodeError", "json.loads("),
        ("record", "ValidationError: Episode: answer: Input should be a valid string (got 5)", "answer=5"),
    ],
)
def test_the_benchmarks_own_exception_fails_the_run_naming_file_and_line(
    broken: object, tmp_path: Path, task: str, error: str, code: str
) -> None:
    line = line_of(code)
    out = tmp_path / "rollouts.jsonl"
    with pytest.raises(BenchmarkCodeError) as caught:
        run(broken, [task], out)
    message = str(caught.value)
    assert isinstance(caught.value, RunFailure) and caught.value.exit_code == 1
    assert "\n" not in message
    assert f"benchmark code raised {error}" in message
    assert f"at broken/benchmark.py:{line} in rollout (task {task}, sample 0)" in message
    traceback = out.with_name("rollouts-benchmark-error.txt")
    assert f"traceback in {traceback}" in message
    assert 'File "' in traceback.read_text() and error.split(":")[0] in traceback.read_text()
    assert not out.read_text()  # nothing scored: the failed sample is not a reward of 0


def test_a_failed_run_stops_the_other_rollouts(broken: object, tmp_path: Path) -> None:
    """The bug fails the run at once: the rollouts still running are cancelled (they would sleep a minute) while the
    benchmark's resources are still open, and nothing of theirs is recorded."""
    events = sys.modules[type(broken).__module__].EVENTS
    started = time.monotonic()
    with pytest.raises(BenchmarkCodeError):
        run(broken, [*(f"slow-{i}" for i in range(3)), "bug"], tmp_path / "rollouts.jsonl")
    assert time.monotonic() - started < 30
    assert events[0] == "resources open" and events[-1] == "resources closed"
    assert sorted(events[1:-1]) == [f"slow-{i} cancelled" for i in range(3)]
    assert not (tmp_path / "rollouts.jsonl").read_text()


def test_a_benchmarks_spec_error_keeps_its_own_message(broken: object, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"^broken: the run lacks something the benchmark needs$"):
        run(broken, ["spec"], tmp_path / "rollouts.jsonl")


def test_the_verl_rollout_path_stops_on_a_benchmark_bug_and_trains_through_an_agent_failure(broken: object) -> None:
    async def traced(task_id: str) -> object:
        trajectory = Trajectory(None, None, {"temperature": 1.0}, 16)  # type: ignore[arg-type]
        return await traced_rollout(
            broken,  # type: ignore[arg-type]
            Task(task_id, "p", "a"),
            trajectory,
            max_turns=1,
            seed=0,
            resources=None,
        )

    line = line_of('{}["score"]')
    where = rf"KeyError: 'score' at broken/benchmark.py:{line} in rollout \(task bug"
    with pytest.raises(BenchmarkCodeError, match=where):
        asyncio.run(traced("bug"))
    # the agent's failure is not the benchmark's: the rollout goes on to "no LLM call", as before
    with pytest.raises(Exception, match="the agent made no LLM call \\(ToolCallError: malformed tool call"):
        asyncio.run(traced("library"))


def test_raise_site_skips_the_standard_library_and_the_engines_budget_is_the_agents() -> None:
    try:
        json.loads("[")
    except ValueError as exc:
        site = raise_site(exc)
        assert site is not None and site.file == str(Path(__file__).resolve())
        assert site.function == "test_raise_site_skips_the_standard_library_and_the_engines_budget_is_the_agents"
        assert not site.ours  # a test module is neither the harness nor a benchmark folder
    assert blame(BudgetExhausted("response budget used up")) == "agent"
    assert issubclass(BudgetExhausted, AgentFailure)
    assert raise_site(ValueError("never raised")) is None and blame(ValueError("x")) == "agent"
