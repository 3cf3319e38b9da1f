"""Tool calls read from reply text (harness.rollout.toolcalls): a reply that is only a JSON call to an offered tool
counts as that call when the serving spec says so, in evaluation (through the policy client's transport, against a
real HTTP server) and in training (the verl trajectory); prose and calls to tools not offered stay text. Adding
the option leaves the hash of every spec that does not use it unchanged."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from harness.rollout.toolcalls import JsonToolCallTransport, json_reply_calls, parse_tool_calls
from harness.spec import load_spec, spec_hash

ROOT = Path(__file__).resolve().parents[1]
NAMES = {"get_user_details", "calculate"}


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}\n```',
        '{\n  "name": "get_user_details",\n  "arguments": {"user_id": "mia_li_3668"}\n}',
        '```\n[{"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}]\n```',
    ],
)
def test_a_reply_that_is_only_a_json_call_is_that_call(text: str) -> None:
    calls = json_reply_calls(text, NAMES)
    assert [(c["name"], c["arguments"]) for c in calls] == [("get_user_details", {"user_id": "mia_li_3668"})]
    assert parse_tool_calls(text, NAMES, json_fallback=True)[0] == ""
    assert parse_tool_calls(text, NAMES, json_fallback=False) == (text.strip(), [])


@pytest.mark.parametrize(
    "text",
    [
        'I will call {"name": "get_user_details", "arguments": {"user_id": "x"}} now',  # prose around it
        '{"name": "transfer_to_human_agents", "arguments": {"summary": "x"}}',  # a tool the request did not offer
        '{"name": "get_user_details", "arguments": "x"}',  # arguments not an object
        '{"name": "get_user_details", "arguments": {}, "extra": 1}',  # not a call's shape
        '[{"name": "get_user_details", "arguments": {}}, "and text"]',
        "```json\n{not json}\n```",
        "### 42",
    ],
)
def test_anything_else_stays_text(text: str) -> None:
    assert json_reply_calls(text, NAMES) == []
    assert parse_tool_calls(text, NAMES, json_fallback=True) == (text.strip(), [])


def test_hermes_tags_come_first() -> None:
    text = '<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}</tool_call>'
    content, calls = parse_tool_calls(text, NAMES, json_fallback=True)
    assert content == "" and [c["name"] for c in calls] == ["calculate"]


class _Server(BaseHTTPRequestHandler):
    reply = ""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _ask(reply: str, tools: bool) -> Any:
    _Server.reply = reply
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def go() -> Any:
        http = httpx.AsyncClient(transport=JsonToolCallTransport(httpx.AsyncHTTPTransport()))
        client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="x", http_client=http)
        extra: dict[str, Any] = {}
        if tools:
            fn = {"name": "get_user_details", "parameters": {"type": "object", "properties": {}}}
            extra["tools"] = [{"type": "function", "function": fn}]
        try:
            return await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], **extra
            )
        finally:
            await http.aclose()

    try:
        return asyncio.run(go())
    finally:
        server.shutdown()


def test_the_transport_turns_a_json_reply_into_the_call() -> None:
    out = _ask('```json\n{"name": "get_user_details", "arguments": {"user_id": "a"}}\n```', tools=True)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_user_details", {"user_id": "a"})
    ]


def test_the_transport_leaves_text_and_tool_less_requests_alone() -> None:
    assert (
        _ask("Could you give me your user id?", tools=True).choices[0].message.content
        == "Could you give me your user id?"
    )
    call = '{"name": "get_user_details", "arguments": {"user_id": "a"}}'
    plain = _ask(call, tools=False).choices[0]
    assert plain.message.content == call and not plain.message.tool_calls


def test_the_option_leaves_other_specs_hashes_alone() -> None:
    """The math tuned-h200 row recorded at c6256f2 (before the option existed) keeps its spec hash."""
    spec = load_spec(ROOT / "benchmarks" / "math" / "spec.yaml", "tuned-h200")
    assert not spec.serving.json_tool_calls
    assert spec_hash(spec) == "0b6b22f6fa32e6da0dcfdc71fb3c1c48bce7b26a525fd227213da0cd0647d223"
    on = spec.model_copy(update={"serving": spec.serving.model_copy(update={"json_tool_calls": True})})
    assert spec_hash(on) != spec_hash(spec)
