"""Harness overhead on the evaluation path: the math evaluation through the harness vs the same chat requests
replayed straight to the model server at the same concurrency.

1. Serve the smoke model (vLLM CPU) once; every pass below talks to this one server.
2. Recording pass (not timed): ``harness.rollout.evaluate`` runs N test tasks x k samples (agent, MCP calculator,
   retries, streamed JSONL records) with every chat request body recorded; it and one untimed replay after it
   warm the server up.
3. Timed rounds, each in a rotated order so that drift on a shared machine does not favour one side:

   * ``harness``: the same evaluation again (a fresh output file, so nothing is resumed);
   * ``raw-chained``: the recorded bodies replayed with plain ``httpx``. The bodies are grouped back into the
     rollouts they came from (a request's messages extend the previous request of its rollout), each rollout's
     requests are sent one after another, ``concurrency`` rollouts at a time: the harness's own request pattern
     (same bodies, so the same ``max_tokens``, temperature 0 and seed) without the agent, tools or records.
     This is the baseline of the overhead figures;
   * ``raw-flat``: the same bodies with no ordering, ``concurrency`` requests in flight: an upper bound on the
     server's throughput for this request mix (a rollout's later turns need not wait for its earlier ones).

Prints requests/s (and tasks/s) per side as min / median over the rounds, the client's CPU seconds per request
(the harness shares the machine's cores with the server, so its CPU time is throughput taken from the server),
the completion tokens each side got back (same work on both sides), and the harness overhead =
1 - (harness req/s / raw-chained req/s), from the medians and from the best passes (target <= 5%): for the
rollouts (from the calculator being up to the last rollout's record) and for the whole ``evaluate()`` call, which
also starts and stops the calculator server (a run starts it while the model server boots; see startup.py).

Before that, the same measurement (harness vs raw-chained) runs against a stub server in its own process that
answers every request after a fixed delay (``--stub-latency``, 2 s by default, about a smoke-model answer here)
with a final answer: a server whose speed does not drift, so the difference is the harness alone, including its
CPU share, even on a machine too loaded for the vLLM figures to settle.

Run: ``python bench/eval_throughput.py [--tasks 20] [--samples 1] [--concurrency 8] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Body = dict[str, Any]


def _conversation(body: Body) -> list[Any]:
    return list(body.get("messages", []))


def group_rollouts(bodies: list[Body]) -> list[list[Body]]:
    """Split a recorded request sequence back into rollouts, keeping each rollout's request order.

    A request continues an open rollout when that rollout's last request's messages are a proper prefix of its
    own (the agent re-sends the conversation with the model's reply and the tool results appended) and the other
    request fields match; otherwise it starts a new rollout.
    """
    rollouts: list[list[Body]] = []
    for body in bodies:
        messages = _conversation(body)
        rest = {k: v for k, v in body.items() if k != "messages"}
        best: list[Body] | None = None
        for chain in rollouts:
            last = chain[-1]
            prev = _conversation(last)
            if len(prev) < len(messages) and messages[: len(prev)] == prev:
                if {k: v for k, v in last.items() if k != "messages"} == rest and (
                    best is None or len(_conversation(best[-1])) < len(prev)
                ):
                    best = chain
        if best is None:
            rollouts.append([body])
        else:
            best.append(body)
    return rollouts


@dataclass
class Pass:
    """One timed pass: wall seconds, chat requests sent, client CPU seconds, completion tokens received."""

    side: str
    wall_s: float
    requests: int
    cpu_s: float
    completion_tokens: int
    errors: int = 0
    rollouts_s: float | None = None
    """Harness only: from the tools being up to the last rollout's record (no tool start or shutdown)."""


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the calculator, once its evaluation closed it)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def replay(base_url: str, rollouts: list[list[Body]], concurrency: int, chained: bool) -> tuple[int, int]:
    """Send the recorded bodies; returns (requests, completion tokens). ``chained``: a rollout's requests in order,
    ``concurrency`` rollouts at a time; else every request independently, ``concurrency`` in flight."""
    sem = asyncio.Semaphore(concurrency)
    tokens = 0
    sent = 0
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:

        async def post(body: Body) -> None:
            nonlocal tokens, sent
            r = await client.post("/chat/completions", json=body)
            r.raise_for_status()
            sent += 1
            tokens += int((r.json().get("usage") or {}).get("completion_tokens") or 0)

        async def chain(bodies: list[Body]) -> None:
            async with sem:
                for body in bodies:
                    await post(body)

        async def single(body: Body) -> None:
            async with sem:
                await post(body)

        if chained:
            await asyncio.gather(*(chain(r) for r in rollouts))
        else:
            await asyncio.gather(*(single(b) for r in rollouts for b in r))
    return sent, tokens


def rotated(sides: list[str], round_index: int) -> list[str]:
    k = round_index % len(sides)
    return sides[k:] + sides[:k]


def summarize(passes: list[Pass], tasks: int, baseline: str = "raw-chained") -> dict[str, Any]:
    """Per side: req/s and tasks/s (min, median, max over passes), CPU ms per request; overhead vs ``baseline``."""
    out: dict[str, Any] = {"sides": {}}
    for side in dict.fromkeys(p.side for p in passes):
        mine = [p for p in passes if p.side == side]
        rps = sorted(p.requests / p.wall_s for p in mine)
        out["sides"][side] = {
            "passes": len(mine),
            "req_per_s": {"min": rps[0], "median": statistics.median(rps), "max": rps[-1]},
            "tasks_per_s": {
                "min": min(tasks / p.wall_s for p in mine),
                "median": statistics.median(tasks / p.wall_s for p in mine),
                "max": max(tasks / p.wall_s for p in mine),
            },
            "wall_s": [round(p.wall_s, 2) for p in mine],
            "requests": [p.requests for p in mine],
            "cpu_ms_per_request": statistics.median(1000 * p.cpu_s / max(p.requests, 1) for p in mine),
            "completion_tokens": [p.completion_tokens for p in mine],
            "errors": sum(p.errors for p in mine),
        }
        rollouts = sorted(p.requests / p.rollouts_s for p in mine if p.rollouts_s)
        if rollouts:
            out["sides"][side]["rollouts_req_per_s"] = {"median": statistics.median(rollouts), "max": rollouts[-1]}
            out["sides"][side]["tool_setup_s"] = statistics.median(p.wall_s - (p.rollouts_s or 0) for p in mine)
    sides = out["sides"]
    if "harness" in sides and baseline in sides:
        h, b = sides["harness"], sides[baseline]["req_per_s"]
        out["overhead_median"] = 1 - h["req_per_s"]["median"] / b["median"]
        out["overhead_best"] = 1 - h["req_per_s"]["max"] / b["max"]
        if "rollouts_req_per_s" in h:
            out["overhead_rollouts_median"] = 1 - h["rollouts_req_per_s"]["median"] / b["median"]
            out["overhead_rollouts_best"] = 1 - h["rollouts_req_per_s"]["max"] / b["max"]
    return out


def report(summary: dict[str, Any], tasks: int, samples: int, concurrency: int, requests: int, server: str) -> str:
    lines = [
        f"eval_throughput against {server}: {tasks} tasks x {samples} samples, {requests} chat requests per pass, "
        f"concurrency {concurrency}, temperature 0"
    ]
    for side, s in summary["sides"].items():
        r, t = s["req_per_s"], s["tasks_per_s"]
        lines.append(
            f"  {side:12} req/s min {r['min']:.3f} median {r['median']:.3f} max {r['max']:.3f}  "
            f"tasks/s median {t['median']:.3f}  client CPU {s['cpu_ms_per_request']:.0f} ms/request  "
            f"completion tokens {s['completion_tokens']}  passes {s['wall_s']} s"
            + (f"  errors {s['errors']}" if s["errors"] else "")
        )
    if "overhead_rollouts_median" in summary:
        h = summary["sides"]["harness"]
        lines.append(
            f"  harness overhead = 1 - harness/raw-chained req/s, rollouts (tools up to last record): "
            f"median {summary['overhead_rollouts_median']:.1%}, best-vs-best {summary['overhead_rollouts_best']:.1%}"
            f"  (target <= 5%)"
        )
        lines.append(
            f"  harness overhead, whole evaluate() call incl. starting and stopping the calculator server "
            f"({h['tool_setup_s']:.1f} s per evaluation, which a run overlaps with the model server's start): "
            f"median {summary['overhead_median']:.1%}, best-vs-best {summary['overhead_best']:.1%}"
        )
    if "raw-flat" in summary["sides"] and "raw-chained" in summary["sides"]:
        flat, chained = summary["sides"]["raw-flat"]["req_per_s"], summary["sides"]["raw-chained"]["req_per_s"]
        lines.append(
            f"  rollout ordering alone (raw-chained vs raw-flat, not harness overhead): "
            f"{1 - chained['median'] / flat['median']:.1%}"
        )
    return "\n".join(lines)


@dataclass
class Bench:
    base_url: str
    bench: Any
    tasks: list[Any]
    make_settings: Any
    tmp: Path
    rollouts: list[list[Body]] = field(default_factory=list)
    n: int = 0

    def harness_pass(self, record: bool = False) -> Pass:
        from harness import timing
        from harness.rollout.evaluate import evaluate

        log: list[Body] = []
        self.n += 1
        marks = self.tmp / f"timing-{self.n}.jsonl"
        last_done = [0.0]

        def on_done(_: Any) -> None:
            last_done[0] = time.time()

        os.environ[timing.TIMING_ENV] = str(marks)
        try:
            cpu0, t0 = _cpu_s(), time.perf_counter()
            out = self.tmp / f"rollouts-{self.n}.jsonl"
            episodes = asyncio.run(evaluate(self.bench, self.tasks, self.make_settings(log), out, on_done))
            wall, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
        finally:
            del os.environ[timing.TIMING_ENV]
        tools_ready = next(m["t"] for m in timing.read(marks) if m["event"] == "tools_ready")
        if record:
            self.rollouts = group_rollouts(log)
        return Pass(
            side="harness",
            wall_s=wall,
            requests=len(log),
            cpu_s=cpu,
            completion_tokens=sum(e.completion_tokens for e in episodes),
            errors=sum(1 for e in episodes if e.error_kind),
            rollouts_s=last_done[0] - tools_ready,
        )

    def raw_pass(self, concurrency: int, chained: bool) -> Pass:
        cpu0, t0 = _cpu_s(), time.perf_counter()
        sent, tokens = asyncio.run(replay(self.base_url, self.rollouts, concurrency, chained))
        return Pass(
            side="raw-chained" if chained else "raw-flat",
            wall_s=time.perf_counter() - t0,
            requests=sent,
            cpu_s=_cpu_s() - cpu0,
            completion_tokens=tokens,
        )


def stub_app(latency_s: float) -> Any:
    """An OpenAI-style chat server that answers every request after ``latency_s`` with a final answer."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        await asyncio.sleep(latency_s)
        message = {"role": "assistant", "content": "The answer is ### 42"}
        return JSONResponse(
            {
                "id": "stub",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "stub"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
            }
        )

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "stub", "object": "model"}]})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])


def measure(b: Bench, concurrency: int, rounds: int, sides: list[str], label: str) -> tuple[Pass, list[Pass]]:
    """Recording pass, one untimed replay (warm-up), then ``rounds`` rotated rounds over ``sides``."""
    warm = b.harness_pass(record=True)
    print(
        f"{label}: recording pass (warm-up, not timed): {warm.requests} requests in {len(b.rollouts)} rollouts, "
        f"{warm.wall_s:.1f} s",
        flush=True,
    )
    # The server's first passes are slower (new batch shapes); one more untimed pass before the rounds.
    print(f"{label}: warm-up replay (not timed): {b.raw_pass(concurrency, chained=False).wall_s:.1f} s", flush=True)
    passes: list[Pass] = []
    for r in range(rounds):
        for side in rotated(sides, r):
            p = b.harness_pass() if side == "harness" else b.raw_pass(concurrency, chained=side == "raw-chained")
            passes.append(p)
            print(f"  round {r + 1} {side:12} {p.wall_s:6.1f} s  {p.requests} requests", flush=True)
    return warm, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--samples", type=int, default=1, help="samples per task (k)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=None, help="default: the smoke profile's")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (each: harness, raw-chained, raw-flat)")
    parser.add_argument(
        "--stub-latency", type=float, default=2.0, help="also measure against a stub answering after this (0: skip)"
    )
    parser.add_argument("--no-vllm", action="store_true", help="only the stub measurement")
    parser.add_argument("--stub-serve", nargs=2, metavar=("PORT", "LATENCY"), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.stub_serve:  # the stub server's own process
        import uvicorn

        port, latency = args.stub_serve
        uvicorn.run(stub_app(float(latency)), host="127.0.0.1", port=int(port), log_level="error")
        return

    from harness.assets.data import load_split
    from harness.assets.models import prepare_model
    from harness.rollout.evaluate import EvalSettings
    from harness.rollout.loading import open_benchmark
    from harness.serving.server import free_port, serve

    spec, bench, _ = open_benchmark("math", "smoke")
    rows, _ = load_split(spec.dataset, spec.evaluation.split)
    tasks = bench.tasks(rows)[: args.tasks]
    max_tokens = args.max_tokens or spec.evaluation.max_tokens
    n_tasks = len(tasks) * args.samples
    figures: dict[str, Any] = {"concurrency": args.concurrency, "tasks": len(tasks), "samples": args.samples}

    def settings_for(base_url: str) -> Any:
        def settings(log: list[Body]) -> EvalSettings:
            return EvalSettings(
                base_url=base_url,
                model=spec.model.name,
                temperature=0.0,
                max_tokens=max_tokens,
                max_turns=spec.agent.max_turns,
                concurrency=args.concurrency,
                samples_per_task=args.samples,
                request_timeout_s=600,
                retries=0,
                seed=0,
                request_log=log,
            )

        return settings

    with tempfile.TemporaryDirectory(prefix="eval-throughput-") as tmp:
        if args.stub_latency > 0:
            port = free_port()
            stub = subprocess.Popen(
                [sys.executable, __file__, "--stub-serve", str(port), str(args.stub_latency)], start_new_session=True
            )
            try:
                url = f"http://127.0.0.1:{port}/v1"
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if httpx.get(url + "/models", timeout=1).status_code == 200:
                            break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline or stub.poll() is not None:
                            raise
                    time.sleep(0.1)
                b = Bench(url, bench, tasks, settings_for(url), Path(tmp) / "stub")
                b.tmp.mkdir()
                label = f"stub server ({args.stub_latency:g} s per answer)"
                warm, passes = measure(b, args.concurrency, args.rounds, ["harness", "raw-chained"], label)
            finally:
                stub.terminate()
                stub.wait(timeout=30)
            stub_summary = summarize(passes, n_tasks)
            print(report(stub_summary, len(tasks), args.samples, args.concurrency, warm.requests, label))
            figures["stub"] = {"latency_s": args.stub_latency, **stub_summary}
        if not args.no_vllm:
            model = prepare_model(spec.model)
            with serve(model, spec.model.name, spec.serving, Path(tmp) / "server.log") as srv:
                url = srv.endpoint.base_url
                b = Bench(url, bench, tasks, settings_for(url), Path(tmp))
                sides = ["harness", "raw-chained", "raw-flat"]
                warm, passes = measure(b, args.concurrency, args.rounds, sides, "vLLM")
            summary = summarize(passes, n_tasks)
            print(report(summary, len(tasks), args.samples, args.concurrency, warm.requests, "vLLM (smoke model)"))
            figures.update(summary)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
