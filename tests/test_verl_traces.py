"""The ``verl`` rollout trace (:mod:`harness.engines.verl.traces`): what the agent loop appends is what the worker
reads back, for each step's GRPO signal and for the rollouts it traced; a line two writers cut is skipped and not
counted; a JSON line of no version, of another version or not a trace line is a one-line error naming the file, and
stops the relay of the step records with it. The agent loop itself runs here against a stand-in for VERL."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from harness.benchmark.protocol import Task
from harness.engines.progress import PROGRESS_PREFIX, read_progress
from harness.engines.verl.rows import TaskRow
from harness.engines.verl.traces import TraceLine, append_trace, read_traces
from harness.engines.verl.worker import MetricsRelay, TraceGroups
from harness.errors import EngineError
from harness.paths import env_python
from support import MATH_SPEC


def traced(uid: str, reward: float, text: str = "### 4") -> TraceLine:
    return TraceLine(
        task_id="t1", uid=uid, reward=reward, task_reward=reward, passed=reward == 1.0, error="", llm_calls=2,
        prompt_tokens=40, response_tokens=12, trained_tokens=9, tool_calls=1,
        messages=[{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": text}],
    )  # fmt: skip


def test_a_trace_line_reads_back_as_the_agent_loop_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "rollout-traces.jsonl"
    assert read_traces(path) == []  # nothing traced yet
    lines = [traced("u1", 1.0, "é, and a lone surrogate \ud800"), traced("u1", 0.0)]
    for line in lines:
        append_trace(path, line)
    assert read_traces(path) == lines
    data = path.read_bytes()
    assert data.isascii() and all(json.loads(raw)["schema_version"] == 1 for raw in data.splitlines())


def test_a_line_cut_by_two_writers_is_skipped_and_not_counted(tmp_path: Path) -> None:
    path = tmp_path / "rollout-traces.jsonl"
    first, second, third = (json.dumps(traced(uid, 1.0).model_dump()) for uid in ("u1", "u2", "u3"))
    cut = "é".encode()[:1]  # a write that ended inside a character
    path.write_bytes(f"{first}\n{second[:30]}{third}\n{second[30:]}\n".encode() + cut + b"\n")
    assert [line.uid for line in read_traces(path)] == ["u1"]
    assert sum(line.llm_calls for line in read_traces(path)) == 2  # the calls of whole lines only


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"schema_version": None}, "trace line: schema_version: missing required key"),
        ({"schema_version": 2}, "trace line: written by a newer harness (schema_version 2; "),
        ({"llm_calls": None}, "trace line: llm_calls: missing required key"),
        ({"reward": "high"}, "trace line: reward: Input should be a valid number"),
        ({"rewards": 1.0}, "trace line: rewards: unknown key"),
    ],
)
def test_a_line_that_is_not_a_trace_line_is_one_line_naming_the_file(
    tmp_path: Path, change: dict[str, object], problem: str
) -> None:
    path = tmp_path / "rollout-traces.jsonl"
    raw = {**traced("u1", 1.0).model_dump(), **change}
    path.write_text(json.dumps({k: v for k, v in raw.items() if v is not None}) + "\n")
    with pytest.raises(EngineError) as raised:
        read_traces(path)
    assert str(raised.value).startswith(f"{path}: {problem}") and "\n" not in str(raised.value)
    path.write_text("[1, 2]\n")
    with pytest.raises(EngineError, match="trace line must be a JSON object"):
        read_traces(path)


def _verl_steps(path: Path) -> None:
    """VERL's file logger: the validation before training (step 0), then one training step."""
    steps = [
        {"step": 0, "data": {"val-core/math/acc/mean@1": 0.25}},
        {"step": 1, "data": {"critic/score/mean": 0.5, "timing_s/step": 2.0, "perf/total_num_tokens": 100}},
    ]
    path.write_text("".join(json.dumps(step) + "\n" for step in steps))


def test_the_relay_prints_each_step_with_its_groups_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metrics, trace = tmp_path / "verl-metrics.jsonl", tmp_path / "rollout-traces.jsonl"
    _verl_steps(metrics)
    for line in (traced("u1", 1.0), traced("u1", 0.0), traced("u2", 0.0)):
        append_trace(trace, line)
    relay = MetricsRelay(metrics, TraceGroups(trace, 2, 2))
    relay.stop.set()  # one pass over what is there
    relay.run()
    assert relay.error is None
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(PROGRESS_PREFIX)]
    assert [read_progress(line, "train.log") for line in printed] == relay.records
    validation, step = relay.records
    assert (validation.step, validation.val_pass_rate, validation.signal) == (0, 0.25, None)
    assert (step.step, step.reward_mean, step.step_time_s, step.tokens_per_s) == (1, 0.5, 2.0, 50.0)
    assert step.signal is not None and (step.signal.groups, step.signal.signal_groups) == (2, 1)  # u2: one rollout


def test_a_trace_that_cannot_be_read_stops_the_relay_with_its_error(tmp_path: Path) -> None:
    metrics, trace = tmp_path / "verl-metrics.jsonl", tmp_path / "rollout-traces.jsonl"
    _verl_steps(metrics)
    trace.write_text(json.dumps({"uid": "u1", "reward": 1.0, "task_reward": 1.0}) + "\n")  # no version
    relay = MetricsRelay(metrics, TraceGroups(trace, 2, 2))
    relay.stop.set()
    relay.run()
    assert str(relay.error) == f"{trace}: trace line: schema_version: missing required key"
    assert [r.step for r in relay.records] == [0]  # nothing relayed past the step that read it


@pytest.fixture
def agent_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The agent loop module, imported against a stand-in for VERL's agent-loop base (VERL needs GPUs)."""
    base = ModuleType("verl.experimental.agent_loop.agent_loop")
    base.AgentLoopBase = type("AgentLoopBase", (), {})  # type: ignore[attr-defined]
    base.AgentLoopOutput = SimpleNamespace  # type: ignore[attr-defined]
    base.register = lambda name: lambda cls: cls  # type: ignore[attr-defined]
    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
        monkeypatch.setitem(sys.modules, name, ModuleType(name))
    monkeypatch.setitem(sys.modules, base.__name__, base)
    yield importlib.import_module("harness.engines.verl.agent_loop")
    sys.modules.pop("harness.engines.verl.agent_loop", None)


def scripted_loop(agent_loop: ModuleType, tokenizer: Any, replies: list[str], served: list[int], **lengths: int) -> Any:
    """The agent loop with a stand-in for VERL's servers that answers ``replies`` in order (each prompt's length
    appended to ``served``); ``lengths``: ``response_length`` and ``prompt_length``."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(*, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]) -> Any:
        served.append(len(prompt_ids))
        ids = tokenizer(replies[len(served) - 1], add_special_tokens=False)["input_ids"] + [end]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids), extra_fields={})

    loop = agent_loop.HarnessAgentLoop()
    loop.tokenizer = tokenizer
    loop.server_manager = SimpleNamespace(generate=generate)
    loop.rollout_config = SimpleNamespace(**lengths)
    return loop


def run_rollouts(agent_loop: ModuleType, loop: Any, info: dict[str, Any], uid: str, n: int = 1) -> list[Any]:
    """``n`` rollouts of one task row, then the benchmark runtimes' sessions closed (the calculator's)."""

    async def rollouts() -> list[Any]:
        try:
            return [await loop.run({"temperature": 1.0}, extra_info=info, uid=uid) for _ in range(n)]
        finally:
            for runtime in agent_loop._RUNTIMES.values():
                await runtime.stack.aclose()
            agent_loop._RUNTIMES.clear()

    return asyncio.run(rollouts())


def test_the_agent_loop_writes_a_line_the_worker_reads(
    agent_loop: ModuleType, smoke_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmark's real rollout (a calculator call, then the answer) through the agent loop, its policy a
    stand-in for VERL's servers: the line it appends is the trajectory's, read back as the worker reads it."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smoke_model)
    turns = ['<tool_call>\n{"name": "calculate", "arguments": {"expression": "17*23"}}\n</tool_call>', "### 391"]
    served: list[int] = []
    path = tmp_path / "rollout-traces.jsonl"
    monkeypatch.setenv("HARNESS_VERL_TRACE", str(path))
    loop = scripted_loop(agent_loop, tokenizer, turns, served, response_length=512, prompt_length=4096)
    row = TaskRow.of(
        0, Task(id="t7", prompt="What is 17 times 23?", answer="391"), spec_path=str(MATH_SPEC), profile="smoke-verl",
        max_turns=5, max_tokens=128, seed=0, shaping={"format_reward": 0.1},
    )  # fmt: skip
    pd.DataFrame([{"extra_info": row.extra_info()}]).to_parquet(tmp_path / "train.parquet")
    info = pd.read_parquet(tmp_path / "train.parquet").to_dict("records")[0]["extra_info"]  # as VERL hands it over
    (output,) = run_rollouts(agent_loop, loop, info, "group-3")
    (line,) = read_traces(path)
    assert (line.task_id, line.uid, line.task_reward, line.passed, line.error) == ("t7", "group-3", 1.0, True, "")
    assert line.reward == output.reward_score and line.reward > line.task_reward  # the shaping's format term
    assert (line.llm_calls, line.tool_calls) == (2, 1) == (output.extra_fields["llm_calls"], len(served) - 1)
    assert line.trained_tokens == sum(output.response_mask) and line.prompt_tokens == len(output.prompt_ids)
    assert line.messages[-1]["content"] == "### 391"
    assert line.validation is False
    groups = TraceGroups(path, 2, 1)
    found = groups.take(0)
    assert found is not None and (found.groups, found.signal_groups) == (1, 0)
    assert groups.rewards == {"group-3": [(line.reward, 1.0)]}


@pytest.mark.skipif(not env_python("bfcl").exists(), reason="the BFCL environment is missing (run `make env`)")
def test_the_agent_loop_scores_a_bfcl_task_by_bfcls_checker(
    agent_loop: ModuleType, smoke_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BFCL's GPU profile through the same loop: a training task of simple_python, a right call and a prose reply from
    the policy; the rewards are the checker's verdicts, as VERL's Ray workers will compute them."""
    from transformers import AutoTokenizer

    from harness.assets.data import load_split
    from harness.rollout.loading import open_benchmark

    spec, bench, spec_path = open_benchmark("bfcl", "learn-h200")
    rows, _ = load_split(bench.spec.dataset, "simple_python-train")
    (task,) = bench.tasks(rows[:1])
    ((name, params),) = json.loads(task.answer)[0].items()  # BFCL's possible answer: {name: {param: [values]}}
    tokenizer = AutoTokenizer.from_pretrained(smoke_model)
    right = "[" + name + "(" + ", ".join(f"{k}={v[0]!r}" for k, v in params.items() if v and v[0] != "") + ")]"
    path = tmp_path / "rollout-traces.jsonl"
    monkeypatch.setenv("HARNESS_VERL_TRACE", str(path))
    replies = [right, "I cannot call any of these functions."]
    loop = scripted_loop(agent_loop, tokenizer, replies, [], response_length=256, prompt_length=2048)
    row = TaskRow.of(
        0, task, spec_path=str(spec_path), profile=spec.profile, max_turns=spec.agent.max_turns,
        max_tokens=spec.evaluation.max_tokens, seed=0, shaping={},
    )  # fmt: skip
    outputs = run_rollouts(agent_loop, loop, row.extra_info(), "g", n=2)
    lines = read_traces(path)
    assert [(line.task_id, line.task_reward, line.passed) for line in lines] == [
        (task.id, 1.0, True),
        (task.id, 0.0, False),
    ]
    assert [o.reward_score for o in outputs] == [1.0, 0.0]
    assert lines[0].messages[-1]["content"] == right
