"""τ² under a hostile policy: a malformed tool call, a call to a tool that does not exist, arguments of the wrong type
and a 50 MB message each fail their own conversation, with a reason, and the evaluation completes.

A scripted policy (``support_tau2``: a real HTTP server in a thread) opens sample ``i`` of airline task 12 with the
``i``-th hostile reply (the request's seed is the sample's index), then gives up in words; the last sample is the
oracle, which does what the task expects. Everything goes through the evaluator's own path
(``harness.rollout.evaluate`` -> ``Tau2Benchmark.rollout`` -> τ²'s evaluator), as ``harness run tau2`` does. A tool
call that reaches one of τ²'s tools is answered as τ²'s own environment answers it (the text its evaluator replays).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.assets.data import load_split
from harness.benchmark import Benchmark, Episode, Task, ToolResultRecord
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import open_benchmark
from harness.rollout.records import finished
from support_tau2 import (
    Reply,
    ScriptedEndpoint,
    completion,
    context_limited,
    oracle_reply,
    tool_call,
    user_reply,
)

TASK = "12"  # add checked bags to reservation YAX4DR: τ² expects update_reservation_baggages(...) among its actions
BAGS = {"reservation_id": "YAX4DR", "total_baggages": 2, "nonfree_baggages": 0, "payment_id": "credit_card_4938634"}
BIG = 50 << 20
HOSTILE: dict[str, dict[str, Any]] = {
    "malformed tool call": tool_call("h1", "update_reservation_baggages", json.dumps(BAGS)[:40]),
    "a tool that does not exist": tool_call("h1", "refund_everything", "{}"),
    # τ²'s tool computes with the string and fails; the lab's tools ran it as 2 and changed the database
    "a string for an integer": tool_call(
        "h1", "update_reservation_baggages", json.dumps({**BAGS, "total_baggages": "2", "nonfree_baggages": "0"})
    ),
    # τ²'s tool finds no flight on that date; the lab's tools refused it, and τ²'s replay then ended in an error
    "a number for a date": tool_call(
        "h1", "search_direct_flight", json.dumps({"origin": "BOS", "destination": "MCO", "date": 20240518})
    ),
}
GIVE_UP = "I am sorry, I could not do that."


@pytest.fixture(scope="module")
def airline() -> tuple[Benchmark, Task]:
    _spec, bench, _ = open_benchmark("tau2", "full")
    rows = [r for split in ("train", "test") for r in load_split(bench.spec.dataset, split)[0]]
    (task,) = bench.tasks([r for r in rows if r["id"] == TASK])
    return bench, task


def hostile_policy(task: Task, openings: list[dict[str, Any] | str]) -> Reply:
    """Sample ``i`` < len(openings): ``openings[i]`` (a tool call, or a message), then :data:`GIVE_UP`; the sample
    after them: the oracle."""
    oracle = oracle_reply([task])

    def reply(body: dict[str, Any]) -> tuple[int, dict]:
        sample = int(body["seed"])
        if sample >= len(openings):
            return oracle(body)
        if body["messages"][-1]["role"] == "tool":
            return completion(GIVE_UP)
        opening = openings[sample]
        return completion(opening) if isinstance(opening, str) else completion(tool_calls=[opening])

    return reply


def run(bench: Benchmark, task: Task, policy: Reply, user: Reply, samples: int, out: Path) -> list[Episode]:
    with ScriptedEndpoint(policy) as p, ScriptedEndpoint(user) as u:
        settings = EvalSettings(
            base_url=p.base_url,
            model="hostile",
            temperature=0.0,  # the request carries the sample's seed
            max_tokens=bench.spec.evaluation.max_tokens,
            max_turns=bench.spec.agent.max_turns,
            concurrency=3,
            samples_per_task=samples,
            request_timeout_s=120,
            retries=0,
            seed=0,
            simulator_url=u.base_url,
            simulator_model="user",
        )
        return asyncio.run(evaluate(bench, [task], settings, out))


def tau2_answer(name: str, arguments: dict[str, Any]) -> str:
    """What τ²'s own airline environment answers the call (a fresh database, as each conversation has)."""
    from tau2.data_model.message import ToolCall
    from tau2.domains.airline.environment import get_environment

    call = ToolCall(id="h1", name=name, arguments=arguments)
    return str(get_environment().get_response(call).content)


def tool_results(episode: Episode) -> list[str]:
    return [r.result for m in episode.messages for r in m.tool_results if isinstance(r, ToolResultRecord)]


def test_hostile_replies_fail_their_conversation_and_the_run_completes(airline: Any, tmp_path: Path) -> None:
    bench, task = airline
    openings: list[dict[str, Any] | str] = [*HOSTILE.values(), "x" * BIG]
    # the simulator is served with a context limit (as the harness's vLLM is): 1 MB of request here
    user = context_limited(user_reply([task]), max_bytes=1 << 20)
    out = tmp_path / "rollouts.jsonl"
    *hostile, big, oracle = run(bench, task, hostile_policy(task, openings), user, len(openings) + 1, out)

    assert oracle.passed and not oracle.error_kind, oracle.info  # the conversation after them scores 1
    for name, episode in zip(HOSTILE, hostile, strict=True):
        # the call failed (or found nothing), the agent went on, the user ended it, τ² scored it: 0, database unchanged
        assert not episode.error_kind, (name, episode.error)
        assert episode.reward == 0.0 and episode.info["termination_reason"] == "user_stop", name
        assert episode.info["reward_info"]["db_check"]["db_match"] is False, name
        assert episode.final_text == "###STOP###" and episode.messages[-2].text == GIVE_UP, name
        (result,) = tool_results(episode)
        # the call as τ²'s evaluator replays it (arguments that are not JSON are recorded as {"raw": text})
        (call,) = [c for m in episode.info["tau2_messages"] for c in m.get("tool_calls") or []]
        theirs = tau2_answer(call["name"], call["arguments"])
        if name == "a tool that does not exist":  # Agent Framework answers before any τ² tool is asked
            assert result.startswith('Error: Requested function "refund_everything" not found'), result
            assert theirs == "Error: Tool 'refund_everything' not found."
        else:  # the answer of τ²'s own environment to the call its evaluator replays
            assert result == theirs, (name, result, theirs)
    assert "unexpected keyword argument 'raw'" in tool_results(hostile[0])[0]
    assert tool_results(hostile[2])[0].startswith("Error: unsupported operand type(s)")
    assert tool_results(hostile[3]) == ["[]"]

    # the 50 MB message: the simulator refuses it, the conversation is the agent's error, with the reason
    assert big.error_kind == "agent" and "maximum context length" in big.error, big.error
    assert big.reward == 0.0 and not big.passed

    # the run completed: every sample recorded once, and read back as finished
    assert sorted(finished(out)) == [(TASK, s) for s in range(len(openings) + 1)]


def test_a_50_mb_message_the_simulator_reads_is_scored(airline: Any, tmp_path: Path) -> None:
    bench, task = airline
    (episode,) = run(bench, task, hostile_policy(task, ["x" * BIG]), user_reply([task]), 1, tmp_path / "r.jsonl")
    assert not episode.error_kind, episode.error
    assert episode.reward == 0.0 and episode.info["termination_reason"] == "user_stop"
    assert len(episode.messages[2].text) == BIG and episode.final_text == "###STOP###"
    assert finished(tmp_path / "r.jsonl")[(TASK, 0)].reward == 0.0
