"""Model text is data: which prompt-mode replies may reach BFCL's code, and the calls a reply makes.

BFCL decodes a prompt-mode reply by parsing it as a Python expression and resolving each argument; an argument
that is an arithmetic expression or a lambda is passed to ``eval`` (``bfcl_eval.model_handler.utils
.resolve_ast_by_type``), so a reply such as ``f(x=__import__('os').system('...') + 1)`` runs a shell command in the
checker. Its multi-turn executor goes further: it writes each decoded call back into a string and ``eval``\\ s it.
The harness never lets model text reach either: :func:`refusal` parses a reply the way BFCL's decoder does (strip
backticks and blanks, add the list brackets, strip quotes) and accepts it only when every call is a name (dotted
names allowed) called with arguments whose values are literals (strings, numbers, booleans, None, and lists,
tuples, sets and dicts of literals) within bounds; :func:`calls` gives a multi-turn reply's calls as (name, keyword
values), which the checker dispatches to the task's backends by name (``dispatch.py``), never through ``eval``.

Bounds, each a refusal (a failed sample, with the reason): a reply of at most :data:`MAX_CHARS` characters,
literals nested at most :data:`MAX_DEPTH` deep, integers of at most :data:`MAX_INT_BITS` bits (Python will not
even print a much larger one: its int-to-str digit limit). A reply that does not parse is accepted: BFCL's decoder
fails on it before evaluating anything, and the sample fails as BFCL would fail it.

This module is used on both sides: by the harness, and by the checker child in BFCL's environment (standard
library only).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

MAX_CHARS = 100_000
MAX_DEPTH = 32
MAX_INT_BITS = 256


class Refused(ValueError):
    """A reply that must not reach BFCL's code; the message says why."""


def _bfcl_text(text: str) -> str:
    """The string BFCL's prompt-mode decoder parses (``default_decode_ast_prompting`` then ``ast_parse``)."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    return text.strip().strip("'")


def _literal_refusal(node: ast.AST, depth: int = 0) -> str | None:
    if depth > MAX_DEPTH:
        return f"literals nested more than {MAX_DEPTH} deep"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int) and node.value.bit_length() > MAX_INT_BITS:
            return f"an integer of {node.value.bit_length()} bits (at most {MAX_INT_BITS})"
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        if isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex):
            return _literal_refusal(node.operand, depth + 1)
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        return next((why for e in node.elts if (why := _literal_refusal(e, depth + 1))), None)
    elif isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return "a dictionary unpacked into another (**)"
        parts = [*node.keys, *node.values]
        return next((why for e in parts if e is not None and (why := _literal_refusal(e, depth + 1))), None)
    return f"not a literal: {ast.unparse(node)[:60]}"


def _plain_name(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _call_refusal(node: ast.Call) -> str | None:
    if not _plain_name(node.func):
        return f"the called thing is not a name: {ast.unparse(node.func)[:60]}"
    for arg in node.args:
        if (why := _literal_refusal(arg)) is not None:
            return f"a positional argument is {why}" if why.startswith("not") else why
    for kw in node.keywords:
        if (why := _literal_refusal(kw.value)) is not None:
            return f"argument {kw.arg or '**'}: {why}"
    return None


def _parse(text: str) -> list[ast.Call] | None:
    """The calls BFCL's decoder would resolve, in order (up to the first element that is not a call), or None
    when it resolves none (the reply does not parse, or is not a call or a list); :class:`Refused` beyond the
    bounds."""
    if len(text) > MAX_CHARS:
        raise Refused(f"a reply of {len(text):,} characters (at most {MAX_CHARS:,} reach the checker)")
    try:
        tree = ast.parse(_bfcl_text(text), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    body = tree.body
    elements = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if elements is None:
        return None
    found = []
    for element in elements:
        if not isinstance(element, ast.Call):
            break
        why = _call_refusal(element)
        if why is not None:
            raise Refused(why)
        found.append(element)
    return found


def refusal(text: str) -> str | None:
    """Why ``text`` must not reach BFCL's decoder, or None when it may.

    BFCL's decoder resolves the calls of the reply in order and stops with an error at the first element that is
    not a call; only the arguments of calls it resolves can be evaluated. So a reply is accepted when every call
    before the first non-call has a plain name and literal arguments within the bounds, and also when it does not
    parse or starts with something that is not a call (the decoder fails on it, evaluating nothing, as it fails on
    prose). Longer replies than :data:`MAX_CHARS` are refused before anything parses them.
    """
    try:
        _parse(text)
    except Refused as exc:
        return str(exc)
    return None


class NotDecoded(ValueError):
    """BFCL's decoder fails on this reply (its multi-turn loop then ends the turn)."""


@dataclass(frozen=True)
class Call:
    """One call of a reply, as BFCL's decoder resolves it: the dotted name, the keyword arguments' values, and
    whether the name is written as the plain ASCII identifier it parses to (Python folds other spellings, such as
    fullwidth letters, to ASCII when it parses a name). BFCL's decoder reads no positional argument; its checker
    runs the ground truth's calls as written, positional ones included (``positional``, read only when asked)."""

    name: str
    arguments: dict[str | None, Any] = field(default_factory=dict)
    spelled_plainly: bool = True
    positional: tuple[Any, ...] = ()


def _value(node: ast.AST) -> Any:
    """An argument's value as BFCL's ``resolve_ast_by_type`` gives it, for the literals :func:`refusal` accepts."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        return -node.operand.value  # type: ignore[attr-defined]  # BFCL negates whatever the unary operator
    if isinstance(node, ast.List):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    raise NotDecoded(f"BFCL's decoder does not read {type(node).__name__}")  # a set, as BFCL's "Unsupported AST type"


def _name(func: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def calls(text: str, positional: bool = False) -> list[Call]:
    """A multi-turn reply's calls, as BFCL's ``default_decode_execute_prompting`` decodes them: :class:`Refused`
    beyond the bounds or for a non-literal argument, :class:`NotDecoded` where BFCL's decoder fails (prose, an
    element that is not a call, a set); an empty list for ``[]``. ``positional``: also read positional arguments
    (a ground truth's calls, which BFCL runs as written)."""
    source = _bfcl_text(text)
    found = _parse(text)
    if found is None:
        raise NotDecoded("not a call or a list of calls")
    tree = ast.parse(source, mode="eval")
    elements = [tree.body] if isinstance(tree.body, ast.Call) else tree.body.elts  # type: ignore[attr-defined]
    if len(found) < len(elements):
        raise NotDecoded("an element of the list is not a call")
    out = []
    for node in found:
        name = _name(node.func)
        written = ast.get_source_segment(source, node.func) or ""
        plain = written == name and name.isascii() and name.isidentifier()
        arguments = {kw.arg: _value(kw.value) for kw in node.keywords}
        args = tuple(_value(a) for a in node.args) if positional else ()
        out.append(Call(name=name, arguments=arguments, spelled_plainly=plain, positional=args))
    return out
