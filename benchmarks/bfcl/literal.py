"""Which prompt-mode replies may reach BFCL's decoder: plain function calls with literal arguments.

BFCL decodes a prompt-mode reply by parsing it as a Python expression and resolving each argument; an argument
that is an arithmetic expression or a lambda is passed to ``eval`` (``bfcl_eval.model_handler.utils
.resolve_ast_by_type``), so a reply such as ``f(x=__import__('os').system('...') + 1)`` runs a shell command in the
checker. The model's text is data: before a reply goes to the checker, :func:`refusal` parses it the way BFCL's
decoder does (strip backticks and blanks, add the list brackets, strip quotes) and accepts it only when every call
is a name (dotted names allowed) called with keyword arguments whose values are literals (strings, numbers,
booleans, None, and lists, tuples, sets and dicts of literals). A reply that does not parse at all is accepted:
BFCL's decoder fails on it before evaluating anything, and the sample fails as BFCL would fail it.
"""

from __future__ import annotations

import ast


def _bfcl_text(text: str) -> str:
    """The string BFCL's prompt-mode decoder parses (``default_decode_ast_prompting`` then ``ast_parse``)."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    return text.strip().strip("'")


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float, complex)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(_literal(v) for v in node.values)
    return False


def _plain_name(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _call_refusal(node: ast.Call) -> str | None:
    if not _plain_name(node.func):
        return f"the called thing is not a name: {ast.unparse(node.func)[:60]}"
    for arg in node.args:
        if not _literal(arg):
            return f"a positional argument is not a literal: {ast.unparse(arg)[:60]}"
    for kw in node.keywords:
        if not _literal(kw.value):
            return f"argument {kw.arg or '**'} is not a literal: {ast.unparse(kw.value)[:60]}"
    return None


def refusal(text: str) -> str | None:
    """Why ``text`` must not reach BFCL's decoder, or None when it may.

    BFCL's decoder resolves the calls of the reply in order and stops with an error at the first element that is
    not a call; only the arguments of calls it resolves can be evaluated. So a reply is accepted when every call
    before the first non-call has a plain name and literal arguments, and also when it does not parse or starts
    with something that is not a call (the decoder fails on it, evaluating nothing, as it fails on prose).
    """
    try:
        tree = ast.parse(_bfcl_text(text), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    body = tree.body
    elements = [body] if isinstance(body, ast.Call) else getattr(body, "elts", [])
    for element in elements:
        if not isinstance(element, ast.Call):
            return None
        why = _call_refusal(element)
        if why is not None:
            return why
    return None
