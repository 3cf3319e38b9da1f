"""Tool calls read from a model's reply text.

Hermes tags (``<tool_call>{json}</tool_call>``, what vLLM's ``hermes`` parser reads) always. With the serving
spec's ``json_tool_calls``, also a reply that is nothing but a JSON call — one object ``{"name", "arguments"}`` or a
list of them, bare or in one Markdown code fence — naming a tool the request offered: Qwen2.5-Coder models write
their calls that way when a long system prompt pushes the template's tool instructions far back. Prose that
mentions JSON, a call to a tool that was not offered, or anything but a single call block stays text.

:class:`JsonToolCallTransport` applies the same rule to a model server's chat-completion responses (evaluation);
the verl engine's trajectory applies it to the text it generates (training), so both read the same replies.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import httpx

__all__ = ["JsonToolCallTransport", "json_reply_calls", "parse_tool_calls"]

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\Z", re.DOTALL)


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def parse_hermes(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Split generated text into content and Hermes-format tool calls (``<tool_call>{json}</tool_call>``)."""
    calls: list[dict[str, Any]] = []
    for raw in _HERMES.findall(text):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            continue
        args = data.get("arguments", {})
        calls.append(
            {"id": _call_id(), "name": data["name"], "arguments": args if isinstance(args, dict) else {"value": args}}
        )
    content = _HERMES.sub("", text).strip() if calls else text.strip()
    return content, calls


def json_reply_calls(text: str, tool_names: set[str]) -> list[dict[str, Any]]:
    """The calls of a reply that is only a JSON call (or a list of them), bare or fenced; [] for anything else."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body.startswith(("{", "[")):
        return []
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return []
    items = data if isinstance(data, list) else [data]
    calls = []
    for item in items:
        if not isinstance(item, dict) or set(item) - {"name", "arguments"} or item.get("name") not in tool_names:
            return []
        args = item.get("arguments", {})
        if not isinstance(args, dict):
            return []
        calls.append({"id": _call_id(), "name": item["name"], "arguments": args})
    return calls


def parse_tool_calls(
    text: str, tool_names: set[str] | None = None, json_fallback: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """Content and tool calls of a reply: Hermes tags, else (``json_fallback``) a reply that is only a JSON call."""
    content, calls = parse_hermes(text)
    if not calls and json_fallback and tool_names:
        calls = json_reply_calls(text, tool_names)
        if calls:
            content = ""
    return content, calls


def tool_names(request: dict[str, Any]) -> set[str]:
    """The function names an OpenAI chat request offers."""
    return {
        str(t["function"]["name"])
        for t in request.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]
    }


class JsonToolCallTransport(httpx.AsyncBaseTransport):
    """Wraps the policy client's transport: a chat completion whose message has no tool calls but whose content is
    only a JSON call to an offered tool comes back as that tool call (``finish_reason`` ``tool_calls``)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if (
            request.method != "POST"
            or not request.url.path.endswith("/chat/completions")
            or response.status_code != 200
        ):
            return response
        try:
            sent = json.loads(request.content)
        except (ValueError, httpx.RequestNotRead):
            return response
        names = tool_names(sent)
        if not names or sent.get("stream"):
            return response
        body = json.loads(await response.aread())
        changed = False
        for choice in body.get("choices") or []:
            message = choice.get("message") or {}
            if message.get("tool_calls") or not isinstance(message.get("content"), str):
                continue
            calls = json_reply_calls(message["content"], names)
            if calls:
                message["content"] = None
                message["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for c in calls
                ]
                choice["finish_reason"] = "tool_calls"
                changed = True
        if not changed:
            return httpx.Response(response.status_code, headers=_plain(response.headers), content=response.content)
        return httpx.Response(200, headers=_plain(response.headers), json=body)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _plain(headers: httpx.Headers) -> dict[str, str]:
    """Response headers without the ones that describe the body as it came over the wire."""
    drop = {"content-length", "content-encoding", "transfer-encoding"}
    return {k: v for k, v in headers.items() if k.lower() not in drop}
