"""How the user simulator is asked for its next message (``agent.options.user_framing``).

``roles`` is τ²'s and the lab's own: the simulator's chat has the agent's messages as ``user`` turns and its own
earlier messages as ``assistant`` turns, and it answers as the ``assistant``. A small instruction-tuned model
answers that as the assistant it was tuned to be: Qwen2.5-Coder-1.5B-Instruct greeted with "Hi! How can I help you
today?" replies "Hello! How can I assist you today?" on every one of the first six airline test tasks.

``transcript`` asks the same model the same thing in a form it follows: the scenario stays the system prompt, the
conversation so far is written out as ``Agent:``/``Customer:`` lines in one user message, and the answer is the
continuation of an assistant message that starts ``Customer:`` (vLLM's ``continue_final_message``), stopped before
a next ``Agent:`` line. The same six tasks then open with the customer's own request. Once the conversation has
begun, the transcript also ends with the scenario's rule for ending it (:data:`DONE`): without it the simulator
repeated its request until τ²'s step limit in 6 of 6 conversations, with it 5 of 6 ended with ``###STOP###``.
The rewrite is of the request only: the reply, its stop tokens (``###STOP###`` ...) and τ²'s evaluation are
unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SPEAKERS = {"user": "Agent", "assistant": "Customer"}
"""Whose words a flipped message is: the simulator's ``user`` turns are the agent's, its ``assistant`` turns its own."""
ASK = "You are the customer in the scenario above. The conversation so far:"
CONTINUE = "Continue as the customer: write only the customer's next message."
DONE = "If the agent has done what you came for, or cannot do more, your message is only ###STOP###."
"""Said once the conversation has begun: the scenario's own rule for ending it, repeated where a small model reads
it last (without it, the 1.5B simulator repeats its request until the step limit)."""
PREFIX = "Customer:"
STOP = "\nAgent:"


def text_of(message: Mapping[str, Any]) -> str:
    """The text of an OpenAI chat message (a string, or the text parts of a list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def transcript_messages(messages: Sequence[Mapping[str, Any]], done: str = DONE) -> list[dict[str, Any]]:
    """The simulator's role-flipped chat as system prompt(s), one user message with the transcript, and the open
    ``Customer:`` message to continue. Messages without text (tool calls, tool results) are left out, as the lab's
    flipping leaves them out of the simulator's view. ``done``: the rule for ending, said once the conversation has
    begun (none where empty)."""
    system = [dict(m) for m in messages if m.get("role") in ("system", "developer")]
    lines = [
        f"{SPEAKERS[str(m['role'])]}: {text_of(m).strip()}"
        for m in messages
        if m.get("role") in SPEAKERS and text_of(m).strip()
    ]
    body = (
        "\n\n".join([ASK, *lines, CONTINUE, *([done] if done else [])])
        if lines
        else f"{ASK}\n\n(nothing yet)\n\n{CONTINUE}"
    )
    return [*system, {"role": "user", "content": body}, {"role": "assistant", "content": PREFIX}]


def transcript_request(options: Mapping[str, Any], done: str = DONE) -> dict[str, Any]:
    """``chat.completions.create`` keyword arguments with the messages rewritten and vLLM told to continue the
    final message; the caller's own stop sequences and extra body are kept."""
    out = dict(options)
    out["messages"] = transcript_messages(out["messages"], done)
    stop = out.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    out["stop"] = [*stops, STOP]
    continuation = {"add_generation_prompt": False, "continue_final_message": True}
    out["extra_body"] = {**(out.get("extra_body") or {}), **continuation}
    return out


class _Completions:
    def __init__(self, inner: Any, done: str) -> None:
        self._inner = inner
        self._done = done

    async def create(self, **options: Any) -> Any:
        response = await self._inner.create(**transcript_request(options, self._done))
        if not options.get("stream"):
            for choice in getattr(response, "choices", None) or []:
                if isinstance(choice.message.content, str):
                    choice.message.content = choice.message.content.strip()
        return response


class _Chat:
    def __init__(self, inner: Any, done: str) -> None:
        self.completions = _Completions(inner.completions, done)


class TranscriptClient:
    """An ``openai.AsyncOpenAI`` for the user simulator whose chat completions are asked in the transcript
    framing (``done``: its rule for ending); everything else is the wrapped client's."""

    def __init__(self, client: Any, done: str = DONE) -> None:
        self._client = client
        self.chat = _Chat(client.chat, done)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
