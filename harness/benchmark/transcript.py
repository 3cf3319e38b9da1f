"""How an :class:`~harness.benchmark.protocol.Episode` records its conversation: one :class:`MessageRecord` a
message, with the tool calls it made and the tool results it carries back.

The written form is the one every recorded rollout has: ``{"role", "text"}``, plus ``tool_calls`` and
``tool_results`` only where there are some; a tool call's ``call_id`` only where its maker gave one (an agent
framework does, a chat completion's record does not).
:meth:`~harness.benchmark.messages.Message.record` and :func:`~harness.benchmark.messages.message_record` make
these records.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCallRecord(_Record):
    """One tool call the message made."""

    name: str
    arguments: str | dict[str, Any] | None
    """As the model wrote them: a JSON string (OpenAI's API), or the mapping an agent framework parsed."""
    call_id: str | None = None
    """The call's id, from an agent framework (its result names it); a record made without one writes none."""

    @model_serializer(mode="wrap")
    def _without_unset_id(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if "call_id" not in self.model_fields_set:
            out.pop("call_id", None)
        return out


class ToolResultRecord(_Record):
    """The result of one tool call, as the agent read it back, with the call's id (an Agent Framework result: its
    text cut to the first 2,000 characters)."""

    call_id: str | None
    """The id of the call it answers (written as it came, ``null`` where the framework gave none)."""
    result: str


class MessageRecord(_Record):
    """One message of an episode's conversation."""

    role: str
    text: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_results: list[ToolResultRecord | str] = Field(default_factory=list)
    """The results the message carries back: with their calls' ids, or as plain text where the calls have none
    (BFCL's prompt mode, whose results come back in a user message)."""

    @model_serializer(mode="wrap")
    def _without_empty_lists(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("tool_calls", "tool_results"):
            if not out.get(key):
                out.pop(key, None)
        return out
