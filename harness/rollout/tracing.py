"""Token-level traces of the policy's LLM calls during rollouts: the (prompt ids, completion ids) pairs that a
policy-gradient step trains on.

:class:`TracingTransport` wraps the HTTP transport of the policy client only (the user simulator and tools are
never traced, so only the trained agent's calls become training data). For every chat completion it asks the
server for token ids (vLLM's ``return_token_ids``) and files the call under the rollout that made it, which
:func:`rollout_scope` names through a context variable (asyncio tasks inherit it, so calls made inside an agent
workflow are attributed correctly).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

_CURRENT: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar("harness_rollout", default=None)


@dataclass
class Call:
    """One traced LLM call: the exact tokens the server saw and produced."""

    prompt_ids: list[int]
    completion_ids: list[int]
    finish_reason: str = ""


@dataclass
class TraceStore:
    """Calls per rollout key (task id, sample)."""

    calls: dict[tuple[str, int], list[Call]] = field(default_factory=dict)
    untraced: int = 0
    """Chat completions made outside any rollout scope, or answered without token ids."""

    def add(self, key: tuple[str, int] | None, call: Call | None) -> None:
        if key is None or call is None:
            self.untraced += 1
            return
        self.calls.setdefault(key, []).append(call)

    def reset(self, key: tuple[str, int]) -> None:
        """Forget a rollout's calls (before a retry, so a failed attempt is never trained on)."""
        self.calls.pop(key, None)


@contextlib.contextmanager
def rollout_scope(task_id: str, sample: int) -> Iterator[None]:
    token = _CURRENT.set((task_id, sample))
    try:
        yield
    finally:
        _CURRENT.reset(token)


class TracingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that adds ``return_token_ids`` to chat completions and records the token ids."""

    def __init__(self, store: TraceStore, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.store = store
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return await self.inner.handle_async_request(request)
        body = json.loads(await request.aread())
        body["return_token_ids"] = True
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        traced = httpx.Request(request.method, request.url, headers=headers, json=body, extensions=request.extensions)
        response = await self.inner.handle_async_request(traced)
        content = await response.aread()
        call = None
        if response.status_code == 200:
            try:
                data = json.loads(content)
                choice = data["choices"][0]
                if data.get("prompt_token_ids") and choice.get("token_ids"):
                    call = Call(data["prompt_token_ids"], choice["token_ids"], choice.get("finish_reason") or "")
            except (ValueError, KeyError, IndexError, TypeError):
                call = None
            self.store.add(_CURRENT.get(), call)
        drop = ("content-length", "content-encoding", "transfer-encoding")
        out_headers = [(k, v) for k, v in response.headers.items() if k.lower() not in drop]
        return httpx.Response(
            response.status_code, headers=out_headers, content=content, extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
