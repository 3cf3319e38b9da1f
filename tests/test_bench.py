"""The bench scripts' own logic (no timings asserted): rollout grouping and replay against a small real HTTP
server, overhead and summary arithmetic, start-up marks, and the digest cache the warm start relies on."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.benchmark import load_module
from support import REPO

eval_throughput = load_module(REPO / "bench" / "eval_throughput.py", "bench_eval_throughput")
startup = load_module(REPO / "bench" / "startup.py", "bench_startup")
run_all = load_module(REPO / "bench" / "run_all.py", "bench_run_all")
tool_schema = load_module(REPO / "bench" / "tool_schema.py", "bench_tool_schema")
machine_speed = load_module(REPO / "bench" / "machine_speed.py", "bench_machine_speed")
user_stop = load_module(REPO / "bench" / "tau2_user_stop.py", "bench_tau2_user_stop")


def _turns(prompt: str, seed: int, n: int) -> list[dict[str, Any]]:
    """The bodies an agent sends for one rollout of ``n`` turns: each re-sends the conversation so far."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "solve"}, {"role": "user", "content": prompt}]
    bodies = []
    for turn in range(n):
        bodies.append({"model": "m", "messages": list(messages), "seed": seed, "max_tokens": 8, "temperature": 0})
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{turn}", "function": {"name": "calc"}}]},
            {"role": "tool", "tool_call_id": f"c{turn}", "content": str(turn)},
        ]
    return bodies


def _interleave(*rollouts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i in range(max(len(r) for r in rollouts)):
        out += [r[i] for r in rollouts if i < len(r)]
    return out


def test_group_rollouts_recovers_each_rollout_in_order() -> None:
    a, b, c = _turns("2+2?", 0, 3), _turns("3*3?", 0, 1), _turns("2+2?", 1, 2)  # c: same task, another sample
    groups = eval_throughput.group_rollouts(_interleave(a, b, c))
    assert sorted(groups, key=len) == sorted([a, b, c], key=len)


def test_group_rollouts_keeps_identical_rollouts_apart() -> None:
    a, b = _turns("2+2?", 0, 2), _turns("2+2?", 0, 2)  # the same task twice with the same seed
    groups = eval_throughput.group_rollouts(_interleave(a, b))
    assert [len(g) for g in groups] == [2, 2]
    assert all(len(g[0]["messages"]) < len(g[1]["messages"]) for g in groups)


class _ChatServer:
    """A real HTTP server that answers chat requests after a short delay and records what arrived when."""

    def __init__(self) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.in_flight = 0
        self.max_in_flight = 0
        self.events: list[tuple[str, int, int]] = []  # (start|end, seed, number of messages)

        async def chat(request: Request) -> JSONResponse:
            body = json.loads(await request.body())
            key = (body["seed"], len(body["messages"]))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.events.append(("start", *key))
            await asyncio.sleep(0.01)
            self.events.append(("end", *key))
            self.in_flight -= 1
            return JSONResponse({"choices": [], "usage": {"completion_tokens": len(body["messages"])}})

        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"data": []})

        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])
        self.server = uvicorn.Server(uvicorn.Config(app, port=self.port, log_level="error", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _ChatServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "test server did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def chat_server() -> Iterator[_ChatServer]:
    with _ChatServer() as server:
        yield server


@pytest.mark.parametrize("chained", [True, False])
def test_replay_sends_every_body_within_the_concurrency(chat_server: _ChatServer, chained: bool) -> None:
    rollouts = [_turns(f"task {i}", i, 1 + i % 3) for i in range(6)]
    sent, tokens = asyncio.run(
        eval_throughput.replay(f"http://127.0.0.1:{chat_server.port}/v1", rollouts, concurrency=2, chained=chained)
    )
    bodies = [b for r in rollouts for b in r]
    assert sent == len(bodies)
    assert tokens == sum(len(b["messages"]) for b in bodies)
    assert chat_server.max_in_flight <= 2
    if chained:  # a rollout's next request leaves only after the previous one was answered
        for seed, r in enumerate(rollouts):
            mine = [e for e in chat_server.events if e[1] == seed]
            assert mine == [(k, seed, len(b["messages"])) for b in r for k in ("start", "end")]
    else:
        assert chat_server.max_in_flight == 2


def test_overhead_and_report_from_passes() -> None:
    Pass = eval_throughput.Pass
    passes = [
        Pass("harness", 10.0, 40, 2.0, 400, rollouts_s=8.0),
        Pass("raw-chained", 8.0, 40, 0.4, 400),
        Pass("raw-flat", 5.0, 40, 0.4, 400),
        Pass("harness", 12.0, 40, 2.0, 400, rollouts_s=10.0),
        Pass("raw-chained", 10.0, 40, 0.4, 400),
        Pass("raw-flat", 5.0, 40, 0.4, 400),
    ]
    s = eval_throughput.summarize(passes, tasks=20)
    assert s["sides"]["harness"]["req_per_s"]["median"] == pytest.approx((4.0 + 40 / 12) / 2)
    assert s["overhead_median"] == pytest.approx(1 - ((4.0 + 40 / 12) / 2) / ((5.0 + 4.0) / 2))
    assert s["overhead_best"] == pytest.approx(1 - 4.0 / 5.0)
    assert s["sides"]["harness"]["cpu_ms_per_request"] == pytest.approx(50.0)
    assert s["sides"]["harness"]["tool_setup_s"] == pytest.approx(2.0)
    assert s["overhead_rollouts_median"] == pytest.approx(1 - ((5.0 + 4.0) / 2) / ((5.0 + 4.0) / 2))
    assert s["overhead_rollouts_best"] == pytest.approx(0.0)
    text = eval_throughput.report(s, 20, 1, 8, 40, "a stub")
    assert "harness overhead" in text and "raw-flat" in text
    assert eval_throughput.rotated(["a", "b", "c"], 1) == ["b", "c", "a"]


def test_stage_durations_from_timing_marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import timing

    path = tmp_path / "timing.jsonl"
    monkeypatch.setenv(timing.TIMING_ENV, str(path))
    for event in ("cli", "model_ready", "server_launched", "setup_done", "tools_ready", "server_ready"):
        timing.mark(event)
    timing.mark("first_request")
    timing.mark("first_request")  # only the first one counts
    with path.open("a") as f:
        f.write('{"event": "cut by a cra')
    marks = timing.read(path)
    assert [m.event for m in marks][-2:] == ["first_request", "first_request"]
    assert {m.pid for m in marks} == {os.getpid()}
    t0 = marks[0].t - 1.5
    d = startup.stage_durations(marks, t0)
    assert list(d) == [e for e, _ in startup.STAGES] + ["total"]
    assert d["cli"] == pytest.approx(1.5)
    assert d["total"] == pytest.approx(sum(v for k, v in d.items() if k != "total"))
    assert startup.stage_durations([], t0) == {}
    assert startup.own_critical_path(d) == pytest.approx(
        d["total"] - d["setup_done"] - d["tools_ready"] - d["server_ready"]
    )


def test_timing_marks_are_versioned_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import timing
    from harness.errors import HarnessError

    path = tmp_path / "timing.jsonl"
    assert timing.read(path) == []
    monkeypatch.setenv(timing.TIMING_ENV, str(path))
    timing.mark("cli")
    (line,) = path.read_text().splitlines()
    assert json.loads(line) == {"schema_version": 1, "event": "cli", "t": json.loads(line)["t"], "pid": os.getpid()}
    with path.open("a") as f:
        f.write(json.dumps({"schema_version": 2, "event": "cli", "t": 1.0, "pid": 1}) + "\n")
    with pytest.raises(HarnessError, match=r"timing.jsonl:2: timing mark: written by a newer harness"):
        timing.read(path)
    path.write_text(line + "\n" + json.dumps({"schema_version": 1, "event": "lunch", "t": 1.0, "pid": 1}) + "\n")
    with pytest.raises(HarnessError, match=r"timing.jsonl:2: timing mark: event: Input should be 'cli'"):
        timing.read(path)


def test_machine_speed_measures_this_machine_in_a_child() -> None:
    figures = machine_speed.measure()
    assert figures is not None and figures["threads"] >= 1
    assert figures["memory_read_gb_s"] > 0 and figures["matmul_gflop_s"] > 0
    line = machine_speed.describe({"threads": 2, "memory_read_gb_s": 9.87, "matmul_gflop_s": 180.4})
    assert line == "memory read 9.9 GB/s, float32 matmul 180 GFLOP/s (2 threads)"
    assert run_all.speed_line("the start").startswith("speed at the start: memory read ")


def test_summary_markdown_one_line_per_target() -> None:
    runs = [
        run_all.ScriptRun("tool_overhead.py", 30, "tool out", figures={"ratio": 0.04}),
        run_all.ScriptRun("compare_scale.py", 20, "compare out", figures={"runs": 1000, "slowest_s": 1.4}),
        run_all.ScriptRun(
            "startup.py", 200, "startup out", figures={"harness_to_first_request_s": [50, 60], "vllm_ready_s": [45, 55]}
        ),
        run_all.ScriptRun(
            "startup.py",
            200,
            "",
            figures={"harness_to_first_request_s": [50], "vllm_ready_s": [45], "harness_own_s": [2.0]},
        ),
        run_all.ScriptRun("eval_throughput.py", 900, "", returncode=1, stderr_tail="Traceback: boom"),
    ]
    text = run_all.summary_markdown("20250101T000000Z", ["machine: 2 cores, test CPU"], runs)
    assert "- machine: 2 cores, test CPU" in text
    assert "| tool overhead per rollout, pooled / seed (median) | 0.040 | <= 0.100 | met |" in text
    assert "| 1.400 s | < 1 s | missed |" in text
    assert "55.0 s (bare vLLM start alone 50.0 s) | < 20 s | missed |" in text
    assert "50.0 s (harness's own part 2.0 s; bare vLLM start alone 45.0 s) |" in text
    assert "| eval_throughput.py | failed (exit 1) |" in text
    assert "Traceback: boom" in text and "## startup.py (200 s)" in text
    h = run_all.HEADLINES["eval_throughput.py"](
        {"concurrency": 8, "overhead_rollouts_median": 0.03, "overhead_median": 0.09}
    )
    assert h.met and h.measured == "vLLM: 3.0% over the rollouts, 9.0% with the calculator's start"
    stub = {"latency_s": 2.0, "overhead_rollouts_median": 0.01, "overhead_median": 0.04}
    h = run_all.HEADLINES["eval_throughput.py"](
        {"concurrency": 8, "overhead_rollouts_median": 0.03, "overhead_median": 0.09, "stub": stub}
    )
    assert h.measured.endswith("; fixed-latency stub (2 s): 1.0%, 4.0%")


def test_cpu_executor_headline_is_the_median_ratio() -> None:
    h = run_all.HEADLINES["cpu_executor.py"]({"start_ratio": 0.69, "decode_ratio": 0.65, "tokens": 128})
    assert h.met and h.measured == "start 0.69, decode of 8 x 128 tokens 0.65"
    assert not run_all.HEADLINES["cpu_executor.py"]({"start_ratio": 0.9, "decode_ratio": 1.02, "tokens": 8}).met


def test_eval_concurrency_headline_needs_a_faster_run_with_the_same_answers() -> None:
    f = {"concurrency": 20, "against": 8, "tasks": 20, "ratio": 0.55, "same_answers": 20}
    h = run_all.HEADLINES["eval_concurrency.py"](f)
    assert isinstance(h, run_all.Headline) and h.met and h.measured.startswith("0.55; same final answer in 20 of 20")
    assert not run_all.HEADLINES["eval_concurrency.py"]({**f, "same_answers": 19}).met
    assert not run_all.HEADLINES["eval_concurrency.py"]({**f, "ratio": 1.02}).met
    bf16 = run_all.HEADLINES["eval_concurrency.py"]({**f, "same_answers": 11, "dtype": "bfloat16"})
    assert bf16.met and "served in bfloat16" in bf16.figure and "answers reported" in bf16.target
    assert not run_all.HEADLINES["eval_concurrency.py"]({**f, "ratio": 1.02, "dtype": "bfloat16"}).met


def test_cpu_sharing_headline_needs_both_beside_and_alone() -> None:
    ratios = {"train_alone_s": 1.05, "decode_alone_s": 1.05, "train_beside_s": 0.17, "decode_beside_s": 0.09}
    passive = {"train_alone_s": 1.2, "decode_alone_s": 1.4, "train_beside_s": 0.1, "decode_beside_s": 0.1}

    def headline(ours: dict[str, float]) -> run_all.Headline:
        return run_all.HEADLINES["cpu_sharing.py"]({"ratios": {"passive": passive, run_all.HARNESS_POLICY: ours}})

    h = headline(ratios)
    assert h.met and h.measured == "beside: train 0.17, decode 0.09; alone: train 1.05, decode 1.05"
    assert not headline({**ratios, "decode_alone_s": 1.3}).met
    assert not headline({**ratios, "train_beside_s": 1.0}).met


def test_cpu_precision_headline_needs_a_faster_evaluation_where_bf16_is_native() -> None:
    f = {"native": "bfloat16", "eval_ratio": 0.62, "train_ratio": 1.03}
    h = run_all.HEADLINES["cpu_precision.py"](f)
    assert h.met and h.measured == "evaluation 0.62 (training, which stays float32: 1.03)"
    assert not run_all.HEADLINES["cpu_precision.py"]({**f, "eval_ratio": 1.01}).met
    assert run_all.HEADLINES["cpu_precision.py"]({**f, "native": "float32", "eval_ratio": 3.0}).met


def test_smoke_run_headlines_one_per_target() -> None:
    figures = {
        "peak_gib": [3.5, 3.9, 4.2],
        "fresh_s": 350.0,
        "warm_s": [130.0, 110.0],
        "warm_first_rollout_s": [40.0],
    }
    lines = run_all.HEADLINES["smoke_run.py"](figures)
    assert isinstance(lines, list)
    by_target = {h.target: h for h in lines}
    assert by_target["<= 4 GiB"].measured == "3.50 / 3.90 / 4.20 GiB" and not by_target["<= 4 GiB"].met
    assert by_target["<= 360 s"].met and by_target["<= 120 s"].met  # the median of the warm runs, 120 s
    assert by_target["<= 20 s"].measured == "40.0 s" and not by_target["<= 20 s"].met
    run = run_all.ScriptRun("smoke_run.py", 900, "", figures=figures)
    text = run_all.summary_markdown("20250101T000000Z", [], [run])
    assert text.count("| smoke run") + text.count("| fresh clone") + text.count("| warm make") == 4


def test_tool_schema_counts_calls_by_name_answers_and_passes() -> None:
    def episode(calls: list[str], answer: str | None, passed: bool) -> dict[str, Any]:
        tool_calls = [{"name": n, "arguments": "{}", "call_id": str(i)} for i, n in enumerate(calls)]
        messages = [{"role": "user", "text": "q"}, {"role": "assistant", "text": "", "tool_calls": tool_calls}]
        return {"messages": messages, "tool_calls": len(calls), "answer": answer, "passed": passed}

    fenced = episode([], None, False)
    fenced["messages"][1]["text"] = '```json\n{"name": "calculate", "arguments": {"expression": "1 + 2"}}\n```'
    episodes = [
        episode(["calculate"], "3", True),
        episode(["calculateArguments", "calculateArguments"], None, False),
        episode([], "7", False),
        fenced,
    ]
    v = tool_schema.summarize("kept", episodes, 12.0)
    assert (v.rollouts, v.parsed_tool_call, v.calculator_named) == (4, 0.5, 0.25)
    assert (v.hash_answer, v.pass_rate) == (0.5, 0.25)
    assert v.tool_names == {"calculate": 1, "calculateArguments": 2}
    assert (v.call_as_text, v.names_in_text) == (0.25, {"calculate": 1})  # written, not parsed
    (line,) = run_all.HEADLINES["tool_schema.py"]({"profile": "p", "kept": vars(v), "removed": vars(v)})
    assert line.measured.startswith("25% vs 25%") and not line.met  # no more calls than the baseline: missed
    assert "call written as text 25% vs 25%, naming `calculate` in 1 vs 1" in line.measured


def test_tree_sampler_sees_a_child_and_names_it(tmp_path: Path) -> None:
    """The memory sampler sums a real process tree: a child that holds 300 MB shows up, named by its script."""
    import os
    import subprocess
    import sys

    from harness.run.memory import TreeSampler

    script = tmp_path / "hold.py"
    script.write_text("import time\nblock = bytearray(300 * 2**20)\nprint('ready', flush=True)\ntime.sleep(30)\n")
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        sample = TreeSampler(os.getpid()).sample()
        assert sample is not None
        names = [name for name, _ in sample.top]
        assert "hold.py" in names
        held = dict(sample.top)["hold.py"]
        assert 300 * 2**20 <= held < 400 * 2**20
        assert sample.pss >= held and sample.processes >= 2
    finally:
        child.kill()
        child.wait()


def test_digest_is_reused_only_while_files_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.assets import digests

    store = tmp_path / "digests.json"
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 100)
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        return f"digest-{weights.read_bytes()[:1].decode()}-{len(calls)}"

    # Files written moments ago are not remembered (a second edit in the same timestamp tick could go unseen).
    assert digests.cached_digest("k", [weights], compute, store) == "digest-a-1"
    assert digests.cached_digest("k", [weights], compute, store) == "digest-a-2"
    monkeypatch.setattr(digests, "RACY_S", 0.0)
    first = digests.cached_digest("k", [weights], compute, store)
    assert digests.cached_digest("k", [weights], compute, store) == first  # remembered
    assert len(calls) == 3
    weights.write_bytes(b"b" * 100)  # same size, new content
    assert digests.cached_digest("k", [weights], compute, store) == "digest-b-4"
    assert digests.cached_digest("other", [weights], compute, store) == "digest-b-5"  # kinds are separate
    weights.unlink()
    other = tmp_path / "other.bin"
    other.write_bytes(b"c")
    digests.cached_digest("k", [other], lambda: "x", store)
    assert list(json.loads(store.read_text())) == [f"k:{other.resolve()}"]  # entries of deleted files dropped


def test_checkpoint_hash_is_the_content_hash_with_or_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.assets import digests
    from harness.assets.models import checkpoint_hash

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(digests, "RACY_S", 0.0)
    import numpy as np
    from safetensors.numpy import save_file

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    save_file({"w": np.full(250, 1.0, dtype=np.float32)}, str(ckpt / "model.safetensors"))
    cold = checkpoint_hash(ckpt)
    assert (tmp_path / "cache" / digests.DIGESTS_FILE).exists()
    assert checkpoint_hash(ckpt) == cold
    save_file({"w": np.full(250, 2.0, dtype=np.float32)}, str(ckpt / "model.safetensors"))
    assert checkpoint_hash(ckpt) != cold


def test_wait_ready_async_fails_fast_when_the_server_dies(tmp_path: Path) -> None:
    from harness.backends.local import LocalHandle
    from harness.errors import ServingError
    from harness.serving.server import Endpoint, ModelServer

    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], text=True)
    server = ModelServer(LocalHandle(proc, None), tmp_path / "server.log", Endpoint("http://127.0.0.1:9/v1", "m"))
    proc.wait()
    with pytest.raises(ServingError, match="exited with code 3"):
        asyncio.run(server.wait_ready_async(60))


def test_a_server_that_fails_to_start_for_a_transient_reason_is_started_again(
    chat_server: _ChatServer, tmp_path: Path
) -> None:
    """vLLM's memory-profiling refusal (another process on the GPU freed memory meanwhile) gets a second start; any
    other start failure, or a third transient one, is an error that names the cause."""
    from harness.backends.local import LocalHandle
    from harness.errors import ServingError
    from harness.serving.server import START_ATTEMPTS, Endpoint, ModelServer

    log = tmp_path / "server.log"
    endpoint = Endpoint(f"http://127.0.0.1:{chat_server.port}/v1", "m")
    fail = [sys.executable, "-c", "raise SystemExit('AssertionError: Error in memory profiling. Initial free ...')"]

    def start(argv: list[str]) -> LocalHandle:
        with log.open("a") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True, text=True)
        proc.wait() if argv is fail else None
        return LocalHandle(proc, None)

    launches: list[str] = []

    def relaunch() -> LocalHandle:
        launches.append("again")
        return start([sys.executable, "-c", "import time; time.sleep(60)"])

    server = ModelServer(start(fail), log, endpoint, relaunch=relaunch)
    try:
        asyncio.run(server.wait_ready_async(60))
    finally:
        server.stop(grace_s=1)
    assert launches == ["again"] and server.attempts == 2

    log.write_text("")
    nowhere = Endpoint("http://127.0.0.1:9/v1", "m")
    stubborn = ModelServer(start(fail), log, nowhere, relaunch=lambda: start(fail))
    with pytest.raises(ServingError, match=r"exited with code 1 while starting \(Error in memory profiling\)"):
        stubborn.wait_ready(60)
    assert stubborn.attempts == START_ATTEMPTS


def test_wait_ready_async_returns_once_the_server_answers(chat_server: _ChatServer, tmp_path: Path) -> None:
    from harness.backends.local import LocalHandle
    from harness.serving.server import Endpoint, ModelServer

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, text=True)
    handle = LocalHandle(proc, None)
    try:
        server = ModelServer(handle, tmp_path / "log", Endpoint(f"http://127.0.0.1:{chat_server.port}/v1", "m"))
        ticks: list[float] = []
        asyncio.run(server.wait_ready_async(60, ticks.append))
        assert ticks == []  # answered on the first poll
    finally:
        handle.stop(grace_s=1)
    assert proc.poll() is not None


def test_vllm_timeline_from_log_stamps() -> None:
    import calendar

    log = "\n".join(
        [
            "(APIServer pid=1) INFO 12-02 16:56:41 [api_utils.py:347] version 0.32.0",
            "(APIServer pid=1) INFO 12-02 16:57:01 [model.py:733] Resolved architecture: LlamaForCausalLM",
            "(EngineCore pid=2) INFO 12-02 16:57:22 [core.py:133] Initializing a V1 LLM engine",
            "(Worker pid=3) INFO 12-02 16:57:43 [default_loader.py:501] Loading weights took 0.77 seconds",
            "(EngineCore pid=2) INFO 12-02 16:57:48 [core.py:402] init engine (profile, warmup model) took 2.54 s",
            "(APIServer pid=1) INFO 12-02 16:57:51 [entry.py:140] Starting vLLM server on http://127.0.0.1:1",
        ]
    )
    launched = calendar.timegm((2026, 12, 2, 16, 56, 11, 0, 0, 0))
    timeline = startup.vllm_timeline(log, launched)
    assert [at for at, _ in timeline] == [30, 50, 71, 92, 92, 97, 100]
    assert startup.vllm_log_phases(log) == [
        "Loading weights took 0.77 seconds",
        "init engine (profile, warmup model) took 2.54 s",
    ]


def test_user_stop_takes_each_conversation_at_the_customers_second_message(tmp_path: Path) -> None:
    def said(role: str, text: str, **more: Any) -> dict[str, Any]:
        return {"role": role, "text": text, **more}

    call = {"name": "cancel_reservation", "arguments": "{}", "call_id": "c1"}
    conversations = [
        [  # the agent's call between the request and its reply is not said: the reply is the second point's cue
            said("assistant", "Hi! How can I help you today?"),
            said("user", "Cancel my flight."),
            said("assistant", "", tool_calls=[call]),
            said("tool", ""),
            said("assistant", "Which reservation?"),
            said("user", "###STOP###"),
            said("assistant", "Bye."),
            said("user", "Thanks."),
        ],
        [
            said("assistant", "Hi! How can I help you today?"),
            said("user", "Cancel my flight."),
            said("assistant", '<tool_call>\n{"name": "cancel_reservation", "arguments": {}}\n</tool_call>'),
            said("user", "Thanks, bye."),
        ],
        [said("assistant", "Hi! How can I help you today?"), said("user", "###STOP###")],  # no second message
    ]
    rollouts = tmp_path / "rollouts-before.jsonl"
    rollouts.write_text("".join(json.dumps({"task_id": i, "messages": m}) + "\n" for i, m in enumerate(conversations)))
    first, second = user_stop.decision_points(rollouts)
    assert [m["text"] for m in first.history] == [
        "Hi! How can I help you today?",
        "Cancel my flight.",
        "Which reservation?",
    ]
    assert (first.task_id, first.recorded, first.asked, first.written_call) == ("0", "###STOP###", True, False)
    assert (second.recorded, second.asked, second.written_call) == ("Thanks, bye.", False, True)
    assert user_stop.written_call('```json\n{"name": "x"}\n```') and not user_stop.written_call("Done: {see above}")
    rows = [
        {"asked": True, "written_call": False, "recorded": "###STOP###", **dict.fromkeys(user_stop.CANDIDATES, "no")},
        {
            "asked": False,
            "written_call": True,
            "recorded": "Thanks",
            **dict.fromkeys(user_stop.CANDIDATES, "###STOP###"),
        },
    ]
    summary = user_stop.summarize(rows)
    assert summary["recorded"] == {"stop": 1, "stop_when_asked": 1, "stop_after_written_call": 0}
    assert summary["current"] == {"stop": 1, "stop_when_asked": 0, "stop_after_written_call": 1}
    assert summary["current_matches_recorded"] == 0
    assert "2 decision points" in user_stop.report(summary, rollouts, 1.0)
