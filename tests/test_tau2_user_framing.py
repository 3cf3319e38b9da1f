"""τ²'s user simulator in the transcript framing: the request the lab's simulator agent sends through Agent
Framework and the OpenAI client, as the server receives it, and the reply it reads back (fast: no servers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.benchmark import load_module
from harness.rollout.loading import open_benchmark

FRAMING_PY = Path(__file__).parents[1] / "benchmarks" / "tau2" / "user_framing.py"
FRAMING = load_module(FRAMING_PY, "harness_benchmark_tau2_user_framing")


def test_transcript_messages_write_out_the_flipped_chat() -> None:
    flipped = [
        {"role": "system", "content": "guidelines and scenario"},
        {"role": "user", "content": "Hi! How can I help you today?"},
        {"role": "assistant", "content": [{"type": "text", "text": "I want to cancel my flight."}]},
        {"role": "user", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "{}"},
        {"role": "user", "content": "  Your user id?  "},
    ]
    out = FRAMING.transcript_messages(flipped)
    assert out[0] == {"role": "system", "content": "guidelines and scenario"}
    assert out[1]["role"] == "user"
    assert out[1]["content"].split("\n\n") == [
        FRAMING.ASK,
        "Agent: Hi! How can I help you today?",
        "Customer: I want to cancel my flight.",
        "Agent: Your user id?",
        FRAMING.CONTINUE,
        FRAMING.DONE,
    ]
    assert out[2] == {"role": "assistant", "content": "Customer:"} and len(out) == 3
    # Before the agent has spoken there is nothing to end: the first request carries no ###STOP### rule.
    first = FRAMING.transcript_messages(flipped[:1])
    assert FRAMING.DONE not in first[1]["content"] and first[1]["content"].endswith(FRAMING.CONTINUE)


def test_the_rule_for_ending_is_the_callers_or_none() -> None:
    """The rule said after the transcript can be another (bench/tau2_user_stop.py compares them), or none."""
    flipped = [{"role": "user", "content": "Hi! How can I help you today?"}]
    other = FRAMING.transcript_messages(flipped, "End with ###STOP### when done.")[0]["content"]
    assert other.split("\n\n")[-2:] == [FRAMING.CONTINUE, "End with ###STOP### when done."]
    assert FRAMING.transcript_messages(flipped, "")[0]["content"].endswith(FRAMING.CONTINUE)
    request = FRAMING.transcript_request({"messages": flipped}, "Stop.")
    assert request["messages"][0]["content"].endswith("\n\nStop.")


def test_request_keeps_the_callers_stops_and_body() -> None:
    req = FRAMING.transcript_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": "###", "extra_body": {"top_k": 5}}
    )
    assert req["stop"] == ["###", "\nAgent:"]
    assert req["extra_body"] == {"top_k": 5, "add_generation_prompt": False, "continue_final_message": True}
    assert req["model"] == "m"


def test_the_lab_user_simulator_sends_the_transcript_and_reads_the_reply() -> None:
    """The lab's own user-simulator agent, Agent Framework's chat client and the OpenAI SDK: what reaches the
    server is the transcript request; the continuation comes back as the customer's message, trimmed."""
    # The benchmark first: it applies its compatibility settings (LiteLLM's bundled cost map) before τ² imports.
    spec, bench, _ = open_benchmark("tau2", "h200")
    import openai
    from agent_framework import Message
    from agent_framework.openai import OpenAIChatCompletionClient
    from agent_framework_lab_tau2 import TaskRunner
    from agent_framework_lab_tau2._message_utils import flip_messages
    from tau2.data_model.tasks import Task as Tau2Task

    assert bench.options.user_framing == "transcript"
    from harness.assets.data import load_split

    rows, _ = load_split(spec.dataset, "test")
    task = Tau2Task(**rows[0])
    sent: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = {"role": "assistant", "content": " Hi, I'd like to change my flight.\n"}
        return httpx.Response(
            200,
            json={
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "sim",
                "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    async def main() -> str:
        http = httpx.AsyncClient(transport=httpx.MockTransport(server))
        client = openai.AsyncOpenAI(base_url="http://sim/v1", api_key="EMPTY", http_client=http)
        chat = OpenAIChatCompletionClient(model="sim", async_client=FRAMING.TranscriptClient(client))
        agent = TaskRunner(max_steps=10).user_simulator(chat, task)
        greeting = Message(role="assistant", contents=["Hi! How can I help you today?"])
        response = await agent.run(flip_messages([greeting]))
        return response.text

    text = asyncio.run(main())
    assert text == "Hi, I'd like to change my flight."
    body = sent[0]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant"]
    assert task.user_scenario.instructions.reason_for_call in body["messages"][0]["content"]
    assert "Agent: Hi! How can I help you today?" in body["messages"][1]["content"]
    assert body["messages"][2]["content"] == "Customer:"
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert "\nAgent:" in body["stop"]


def test_user_framing_is_checked(isolated: Path) -> None:
    from harness.errors import SpecError

    with pytest.raises(SpecError, match="user_framing"):
        bench_cls = type(open_benchmark("tau2", "smoke")[1])
        spec = open_benchmark("tau2", "smoke")[0]
        bad = spec.model_copy(update={"agent": spec.agent.model_copy(update={"options": {"user_framing": "x"}})})
        bench_cls(bad, Path("benchmarks/tau2"))
