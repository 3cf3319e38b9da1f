"""Chat messages with OpenAI's field names, one chat completion against the served policy, and the episode's record.

:class:`Message` is what a benchmark sends (``role``, ``content``, ``tool_calls``, ``tool_call_id``, ``name``, as
the OpenAI API spells them); :func:`complete` sends messages to the policy of a :class:`RolloutContext` with the
spec's sampling settings and returns the reply with its tokens and time. An :class:`Episode` records each message
as a :class:`~harness.benchmark.transcript.MessageRecord` (:meth:`Message.record`, :func:`message_record` for an
Agent Framework message), written as ``{"role", "text"}`` with its tool calls and results where it has some: the
format every recorded rollout already has.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.benchmark.protocol import RolloutContext
from harness.benchmark.transcript import MessageRecord, ToolCallRecord, ToolResultRecord

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One chat message, in OpenAI's fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Role
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    """The assistant's calls, as the API returns them (``{"id", "type", "function": {"name", "arguments"}}``)."""
    tool_call_id: str | None = None
    name: str | None = None

    def api(self) -> dict[str, Any]:
        """The message as the chat completions API takes it (fields left unset omitted)."""
        return self.model_dump(exclude_none=True)

    def record(self, tool_results: Iterable[ToolResultRecord | str] = ()) -> MessageRecord:
        """The message as an :class:`Episode` records it: role and text, with its tool calls where made, and the
        ``tool_results`` it carries back (a message that returns calls' results in its text, as BFCL's prompt mode
        does)."""
        calls = [
            ToolCallRecord(name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in self.tool_calls or []
        ]
        return MessageRecord(role=self.role, text=self.content or "", tool_calls=calls, tool_results=list(tool_results))


@dataclass(frozen=True)
class Reply:
    """The policy's reply to :func:`complete`."""

    message: Message
    prompt_tokens: int
    completion_tokens: int
    latency_s: float

    @property
    def text(self) -> str:
        return self.message.content or ""


async def complete(ctx: RolloutContext, messages: Sequence[Message], **options: Any) -> Reply:
    """One chat completion of ``messages`` by the policy of ``ctx``, with its sampling settings (temperature, the
    most tokens a reply, the seed, the request timeout); ``options`` go to the API as they are (``tools=...``)."""
    started = time.perf_counter()
    response = await ctx.client.chat.completions.create(
        model=ctx.model,
        messages=[m.api() for m in messages],
        temperature=ctx.temperature,
        max_tokens=ctx.max_tokens,
        seed=ctx.seed,
        timeout=ctx.request_timeout_s,
        **options,
    )
    latency = time.perf_counter() - started
    got = response.choices[0].message if response.choices else None
    calls = [c.model_dump() if hasattr(c, "model_dump") else dict(c) for c in getattr(got, "tool_calls", None) or []]
    usage = response.usage
    return Reply(
        message=Message(role="assistant", content=(got.content or "") if got else "", tool_calls=calls or None),
        prompt_tokens=int(usage.prompt_tokens) if usage else 0,
        completion_tokens=int(usage.completion_tokens) if usage else 0,
        latency_s=latency,
    )


def message_record(message: Any) -> MessageRecord:
    """The record of one Agent Framework message: role, text and tool calls/results."""
    calls, results = [], []
    for content in message.contents:
        kind = getattr(content, "type", "")
        if kind == "function_call":
            calls.append(ToolCallRecord(name=content.name, arguments=content.arguments, call_id=content.call_id))
        elif kind == "function_result":
            results.append(ToolResultRecord(call_id=content.call_id, result=str(content.result)[:2000]))
    return MessageRecord(role=str(message.role), text=message.text or "", tool_calls=calls, tool_results=results)
