"""When does τ²'s user simulator end the conversation? A replay of recorded conversations' decision points.

τ²'s user simulator ends a conversation by answering only ``###STOP###``. Under the ``transcript`` framing
(benchmarks/tau2/user_framing.py) the harness repeats that rule (``DONE``) where a small model reads it last; on
the GPU the 1.5B simulator then ended 17 of 25 airline test conversations right after the agent's first reply,
including replies that asked it for a reservation number. This script measures the rule itself:

1. Serve the profile's user-simulator model on this machine (vLLM; a CPU is enough).
2. From a run's ``rollouts-*.jsonl``, take every conversation at its first decision point: the agent's greeting,
   the customer's request and the agent's first reply (the history the simulator had when it chose its second
   message). The recorded reply says what it chose then.
3. Ask the simulator for that message again through the benchmark's own path (the lab runner's user agent with
   the task's scenario, the transcript client, temperature 0, seed 0, the profile's token cap), once per rule:
   the current ``DONE`` and each candidate. Count the ``###STOP###`` answers, and those given to a reply that
   asked the customer a question.

Run: ``python bench/tau2_user_stop.py ROLLOUTS [--profile h200] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

CANDIDATES = {
    "current": None,  # the framing's DONE
    "none": "",  # no rule after the transcript: the scenario's guidelines only
    "answer-first": (
        "If the agent asks you something, answer it from the scenario. Only when the agent has done everything you "
        "came for, or has refused it, is your message only ###STOP###."
    ),
    "in-words": (
        "Only if the agent has told you in words that your request is done, or that it cannot be done, is your "
        "message only ###STOP###. Code or JSON from the agent is not an answer: say what you still need."
    ),
}
"""The rules compared: the framing's own and candidates for it."""
STOP = "###STOP###"


@dataclass(frozen=True)
class Point:
    task_id: str
    history: list[dict[str, str]]  # role (the conversation's, not flipped) and text
    recorded: str  # the simulator's message at this point in the recorded run
    asked: bool  # the agent's last message asks the customer something
    written_call: bool  # the agent's last message is a tool call written as text (tags, a fence, a JSON object)


def written_call(text: str) -> bool:
    """A reply that is a call the agent wrote out instead of making: hermes-like tags, a code fence or a JSON
    object (none of them read as a tool call; the simulator sees it as text)."""
    text = text.strip()
    return "<tool_call>" in text or text.startswith(("```", "{"))


def decision_points(rollouts: Path) -> list[Point]:
    """Each conversation at the customer's second message, when the agent's first reply had text."""
    points = []
    for line in rollouts.read_text().splitlines():
        record = json.loads(line)
        said = [
            {"role": m["role"], "text": m.get("text") or ""}
            for m in record["messages"]
            if m["role"] in ("user", "assistant") and (m.get("text") or "").strip()
        ]
        users = [i for i, m in enumerate(said) if m["role"] == "user"]
        if len(users) < 2:
            continue
        at = users[1]
        history = said[:at]
        last = history[-1]["text"]
        points.append(Point(str(record["task_id"]), history, said[at]["text"], "?" in last, written_call(last)))
    return points


async def ask(base_url: str, model: str, task: Any, runner: Any, framing: Any, point: Point, done: str | None) -> str:
    from agent_framework import Message
    from agent_framework.openai import OpenAIChatCompletionClient
    from openai import AsyncOpenAI

    client = framing.TranscriptClient(
        AsyncOpenAI(base_url=base_url, api_key="EMPTY", timeout=1800), framing.DONE if done is None else done
    )
    agent = runner.user_simulator(OpenAIChatCompletionClient(model=model, async_client=client), task)
    flipped = [
        Message(role="user" if m["role"] == "assistant" else "assistant", contents=[m["text"]]) for m in point.history
    ]
    response = await agent.run(flipped)
    return response.text.strip()


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "points": len(rows),
        "asked": sum(r["asked"] for r in rows),
        "written_call": sum(r["written_call"] for r in rows),
    }
    for name in ("recorded", *CANDIDATES):
        stops = [r for r in rows if r[name].startswith(STOP)]
        out[name] = {
            "stop": len(stops),
            "stop_when_asked": sum(r["asked"] for r in stops),
            "stop_after_written_call": sum(r["written_call"] for r in stops),
        }
    out["current_matches_recorded"] = sum(r["current"].startswith(STOP) == r["recorded"].startswith(STOP) for r in rows)
    return out


def report(summary: dict[str, Any], rollouts: Path, seconds: float) -> str:
    lines = [
        f"tau2_user_stop: {summary['points']} decision points from {rollouts.name} "
        f"(the agent's reply asked a question at {summary['asked']}, was a call written as text at "
        f"{summary['written_call']}), {seconds:.0f} s",
    ]
    for name in ("recorded", *CANDIDATES):
        c = summary[name]
        lines.append(
            f"  {name:>12}: {c['stop']} ###STOP### ({c['stop_after_written_call']} after a written call, "
            f"{c['stop_when_asked']} to a question)"
        )
    lines.append(f"  the current rule agrees with the recorded run at {summary['current_matches_recorded']} points")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", type=Path, help="a run's rollouts-before.jsonl or rollouts-after.jsonl")
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--limit", type=int, default=0, help="only the first N decision points")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from tau2.data_model.tasks import Task as Tau2Task

    from harness.assets.data import load_split
    from harness.assets.models import prepare_model
    from harness.benchmark import load_module
    from harness.rollout.loading import open_benchmark
    from harness.serving.server import serve

    spec, bench, path = open_benchmark("tau2", args.profile)
    framing = load_module(path.with_name("user_framing.py"), "harness_benchmark_tau2_user_framing")
    assert spec.user_simulator is not None
    rows_by_id = {}
    for split in spec.dataset.splits:
        rows, _ = load_split(spec.dataset, split)
        rows_by_id.update({str(r["id"]): r for r in rows})
    points = decision_points(args.rollouts)[: args.limit or None]
    # the runner's user agent: the lab's scenario prompt, the profile's token cap, temperature 0 and seed 0
    runner = bench._runner(SimpleNamespace(max_tokens=spec.evaluation.max_tokens, temperature=0.0, seed=0))
    model = prepare_model(spec.user_simulator.model)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tau2-user-stop-") as tmp:
        with serve(model, spec.user_simulator.model.name, spec.serving, Path(tmp) / "server.log") as server:
            endpoint = server.endpoint

            async def replay() -> list[dict[str, Any]]:  # one event loop for every request
                results = []
                for n, point in enumerate(points, 1):
                    task = Tau2Task(**rows_by_id[point.task_id])
                    row: dict[str, Any] = {
                        "task_id": point.task_id,
                        "asked": point.asked,
                        "written_call": point.written_call,
                        "recorded": point.recorded,
                    }
                    for name, done in CANDIDATES.items():
                        row[name] = await ask(endpoint.base_url, endpoint.model, task, runner, framing, point, done)
                    results.append(row)
                    marks = " ".join(f"{k}={'STOP' if row[k].startswith(STOP) else 'talk'}" for k in CANDIDATES)
                    recorded = "STOP" if point.recorded.startswith(STOP) else "talk"
                    print(f"  [{n}/{len(points)}] task {point.task_id}: recorded={recorded} {marks}", flush=True)
                return results

            results = asyncio.run(replay())
    summary = summarize(results)
    print(report(summary, args.rollouts, time.perf_counter() - started))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rules": CANDIDATES, "points": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
