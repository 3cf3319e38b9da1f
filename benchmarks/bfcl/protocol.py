"""The checker's protocol: the records the harness (``checker.py``) and the checker child (``child.py``, in BFCL's
environment) pass, one JSON object a line each way.

The child starts by writing :class:`Ready`. Then, for each :data:`Request` the harness writes (``op`` names it), it
writes one reply: the request's own (its ``REPLIES``) or :class:`Failure`.

- ``prepare`` -> :class:`Prepared`: the row through BFCL's loading steps, with the messages (and, in fc mode, the
  tools) its handler sends;
- ``check`` -> :class:`Verdict`: the verdict of BFCL's eval runner on one single-turn output;
- ``step`` -> :class:`Stepped`: one step of a multi-turn conversation (the reply decoded, its calls run on the
  child's backends, the results message), or :class:`Refused` for a reply beyond the bounds of ``literal.py``;
- ``check_multi_turn`` -> :class:`Verdict`: the verdict of BFCL's multi-turn checker on a conversation's replies;
- ``probe`` -> :class:`ProbeResult`: whether known-good input scores as BFCL scores it;
- ``max_steps`` -> :class:`MaxSteps`: BFCL's limit of model steps in one turn.

Every line carries ``schema_version`` (:data:`PROTOCOL_VERSION`). Both sides come from one checkout, so nothing is
upgraded: a line of another version, of no version or that is not a valid record is refused with one line naming
what is wrong (:class:`ProtocolError`). The envelope is typed; what is BFCL's own (a dataset row, its messages and
tools, its ground truth, the error of its verdict) stays as BFCL writes it.

This module needs only pydantic and the standard library: the child, which runs isolated in BFCL's environment and
cannot import the harness, loads it by its file.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

PROTOCOL_VERSION = 1
VERSION_KEY = "schema_version"

Mode = Literal["prompt", "fc"]


class ProtocolError(ValueError):
    """A line that is not a record of this protocol version; its text is one line naming what is wrong."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    schema_version: Literal[1] = PROTOCOL_VERSION


# -- replies -----------------------------------------------------------------------------------------------------


class Ready(_Record):
    """The child's first line: it has imported BFCL and serves requests."""

    reply: Literal["ready"] = "ready"
    confinement: str
    """What the child's own file-system confinement holds (``confine.py``): ``confined: ...`` or why not."""


class Prepared(_Record):
    reply: Literal["prepared"] = "prepared"
    entry: dict[str, Any]
    """The row as BFCL's loader leaves it (predefined functions, the language hint in each description)."""
    messages: list[dict[str, Any]]
    """The messages BFCL's OpenAI-compatible handler sends (prompt mode: its system prompt listing the functions)."""
    tools: list[dict[str, Any]] = []
    """fc mode: the functions as its handler converts them to tools; none in prompt mode."""


class Verdict(_Record):
    reply: Literal["verdict"] = "verdict"
    valid: bool
    error_type: str = ""
    """BFCL's error type (``ast_decoder:decoder_failed``, ``multi_turn:...``), or the harness's (``harness:...``);
    empty for a valid output."""
    error: Any = None
    """BFCL's account of the error, as its checker gives it."""


class Stepped(_Record):
    """One step of a multi-turn turn. ``decoded`` is None where the reply decodes to no call (the turn ends)."""

    reply: Literal["step"] = "step"
    decoded: list[str] | None
    """BFCL's text of each call the reply decodes to."""
    results: list[str] = []
    """The result of each call, run on the child's backends."""
    message: dict[str, Any] | None = None
    """The message that carries the results back to the model, in BFCL's format."""


class Refused(_Record):
    """A step's reply beyond the bounds of ``literal.py``, or with an argument that is not a literal: nothing ran."""

    reply: Literal["refused"] = "refused"
    refused: str


class ProbeResult(_Record):
    reply: Literal["probe"] = "probe"
    ok: bool


class MaxSteps(_Record):
    reply: Literal["max_steps"] = "max_steps"
    max_steps: int


class Failure(_Record):
    """The child failed on a request (an exception, a request that is not a record of this version)."""

    reply: Literal["failure"] = "failure"
    failure: str
    """What failed, in one line."""
    trace: str = ""
    """The end of the traceback, where there is one."""


Reply = Annotated[
    Ready | Prepared | Verdict | Stepped | Refused | ProbeResult | MaxSteps | Failure, Field(discriminator="reply")
]
REPLY_ADAPTER: TypeAdapter[Reply] = TypeAdapter(Reply)


# -- requests ----------------------------------------------------------------------------------------------------


class Prepare(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (Prepared,)
    op: Literal["prepare"] = "prepare"
    entry: dict[str, Any]
    """A dataset row, as the category file holds it."""
    mode: Mode


class Check(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (Verdict,)
    op: Literal["check"] = "check"
    entry: dict[str, Any]
    """The row as :class:`Prepared` gives it."""
    answer: list[dict[str, Any]] | None
    """BFCL's possible answers; None for the (ir)relevance categories."""
    mode: Mode
    output: str | list[dict[str, Any]]
    """The model's text (prompt mode, or fc mode without a tool call) or its tool calls as ``[{name: arguments}]``
    (fc mode), as BFCL's handlers record them."""


class Step(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (Stepped, Refused)
    op: Literal["step"] = "step"
    entry: dict[str, Any]
    """The prepared multi-turn row (its id names the backends that carry over from step to step)."""
    output: str
    """The model's reply."""


class CheckMultiTurn(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (Verdict,)
    op: Literal["check_multi_turn"] = "check_multi_turn"
    entry: dict[str, Any]
    answer: list[list[str]]
    """The ground truth's calls, per turn."""
    output: list[list[str]]
    """The model's replies, per turn and step."""


class Probe(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (ProbeResult,)
    op: Literal["probe"] = "probe"


class AskMaxSteps(_Record):
    REPLIES: ClassVar[tuple[type[_Record], ...]] = (MaxSteps,)
    op: Literal["max_steps"] = "max_steps"


Request = Annotated[Prepare | Check | Step | CheckMultiTurn | Probe | AskMaxSteps, Field(discriminator="op")]
REQUEST_ADAPTER: TypeAdapter[Request] = TypeAdapter(Request)


# -- lines -------------------------------------------------------------------------------------------------------


def line(record: BaseModel) -> str:
    """``record`` as its line (no newline). Written by :func:`json.dumps`, as the reader reads it
    (:func:`json.loads`): a model's text may hold a lone surrogate, which pydantic's JSON cannot carry; what BFCL
    leaves in a verdict's ``error`` that is not JSON is written as its ``repr``."""
    return json.dumps(record.model_dump(), default=repr)


def _first_error(err: ValidationError) -> str:
    """A validation error in one line: ``key.path: what is wrong``, and how many more there are (as the harness's
    own records say it; a key that is not printable is quoted)."""
    first = err.errors()[0]
    parts = [str(p) for p in first["loc"] if not str(p).startswith("function-")]
    loc = ".".join(p if p.isprintable() else repr(p) for p in parts) or "<root>"
    msg = first["msg"].replace("\n", "\\n")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "missing":
        msg = "missing required key"
    elif first["type"] in ("union_tag_not_found", "union_tag_invalid"):  # the record's kind: ``op`` or ``reply``
        ctx = first.get("ctx") or {}
        loc = str(ctx.get("discriminator", loc)).strip("'")
        msg = "missing required key" if "tag" not in ctx else f"unknown {ctx['tag']!r} (one of {ctx['expected_tags']})"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def _read(text: str, adapter: TypeAdapter[Any], what: str) -> Any:
    try:
        raw = json.loads(text)
    except ValueError:
        shown = text.strip()
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ProtocolError(f"{what} is not JSON: {shown!r}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"{what} is not a JSON object")
    if VERSION_KEY not in raw:
        raise ProtocolError(f"{what}: {VERSION_KEY}: missing required key")
    version = raw[VERSION_KEY]
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise ProtocolError(f"{what}: {VERSION_KEY} {version!r}, not this protocol's version {PROTOCOL_VERSION}")
    try:
        return adapter.validate_python(raw)
    except ValidationError as err:
        raise ProtocolError(f"{what}: {_first_error(err)}") from None


def read_request(text: str) -> Request:
    """The request on a line the harness wrote; :class:`ProtocolError` for one that is not a request of this
    version."""
    return _read(text, REQUEST_ADAPTER, "request")


def read_reply(text: str) -> Reply:
    """The reply on a line the child wrote; :class:`ProtocolError` for one that is not a reply of this version."""
    return _read(text, REPLY_ADAPTER, "reply")
