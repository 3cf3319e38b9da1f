"""Reward of the math benchmark: extract the final answer after ``###`` and compare it with the ground truth.

Semantics follow the original sample's checker (string equality, option letters, numeric closeness with a 1 %
relative tolerance) but the numeric comparison never hands model text to ``eval``: expressions are parsed with
:func:`ast.parse` (``mode="eval"``, which only builds a tree) and evaluated by a small whitelist interpreter over
exact fractions and floats, with bounds on input length, tree size and depth, exponents and magnitudes.

Accepted: integer and float literals (``1_000``, ``0x10``, ``1e3``, ``.5``), ``+ - * / % **``, unary ``+``/``-``,
parentheses, the constants ``pi`` and ``E`` and ``sqrt(x)``, plus the ``"<expr> = around <decimal>"`` form of the
calculator tool (only the part before `` = around `` counts). Anything else (names, calls, attributes, ``^``,
``!``, ``12%``, units, thousands commas) is "not a number" and therefore never numerically equal to anything.
"""

from __future__ import annotations

import ast
import math
import re
import string
from fractions import Fraction

__all__ = ["ANSWER_MARKER", "extract_answer", "is_correct", "reward", "safe_eval_number"]

ANSWER_MARKER = "###"

DEFAULT_REL_TOL = 1e-2
MAX_EXPR_CHARS = 200
"""Longer (stripped) expressions are not evaluated: no real answer needs more."""
MAX_AST_NODES = 256
MAX_AST_DEPTH = 64
MAX_EXPONENT = 1000
"""Largest ``|k|`` accepted in an exact power ``x ** k``; bigger integer exponents are rejected outright."""
MAX_BITS = 10_000
"""Largest bit length of the numerator or denominator of any exact intermediate value."""

_AROUND = " = around "
_OPTION_LETTERS = frozenset(string.ascii_letters)
_OPTION_NOISE = re.compile(r"[\s()]+")
_SPACES = re.compile(r"\s*")
_CONSTANTS: dict[str, float] = {"pi": math.pi, "E": math.e}
_FUNCTIONS = frozenset({"sqrt"})

_Number = Fraction | float


class _Unsafe(Exception):
    """The expression is outside the whitelist or its bounds."""


# --------------------------------------------------------------------------------------------------------------------
# Answer extraction
# --------------------------------------------------------------------------------------------------------------------


def extract_answer(text: str | None) -> str | None:
    """The final answer: the text after the first usable ``###`` up to the next ``###``, or the end of its line.

    Exactly what ``re.search(r"###\\s*(.+?)(\\s*###|$)", text).group(1)`` returns (``None`` when it does not match),
    computed in linear time: that regex backtracks cubically on inputs like ``"###" + " " * n + "\\n\\n"``.
    """
    if not isinstance(text, str):
        return None
    n = len(text)
    start = text.find(ANSWER_MARKER)
    while start != -1:
        found = _answer_at(text, n, start)
        if found is not None:
            return found
        start = text.find(ANSWER_MARKER, start + 1)
    return None


def _answer_at(text: str, n: int, start: int) -> str | None:
    """Group 1 of a match that begins at ``start`` (where ``###`` occurs), or ``None`` when none begins there.

    How the regex proceeds: ``\\s*`` takes the whole whitespace run after the marker, the lazy ``.+?`` (which
    cannot cross a newline) then stops at the first ``e`` where only whitespace separates ``e`` from a ``###``, or
    where ``$`` holds (the end of the text, or just before a final newline). When no such ``e`` exists on the
    answer's line, ``\\s*`` gives back characters one at a time and the answer starts inside the run.

    Backing off is decided by one position: the last non-newline character ``s`` of the run. If the first marker
    after the run starts right at its end, a one-character answer ``text[s]`` matches. Otherwise the end candidate
    (that marker's preceding whitespace, or ``$``) lies beyond the run, so an earlier ``s`` has an earlier line end
    and cannot do better unless the line ends at a final newline, which is ``s``'s own line.
    """
    first = start + len(ANSWER_MARKER)
    spaces = _SPACES.match(text, first)
    word = spaces.end() if spaces else first
    if word < n:  # the answer starts at the first non-space character
        line_end = _find_or(text, "\n", word, n)
        end = min(_dollar(text, n, word), _space_before(text, word + 1, text.find(ANSWER_MARKER, word + 1)))
        if end <= line_end:
            return text[word:end]
    s = first + len(text[first:word].rstrip("\n")) - 1
    if s < first:
        return None
    marker = text.find(ANSWER_MARKER, word)
    before_marker = first if marker == word else _space_before(text, word + 1, marker)
    end = max(min(_dollar(text, n, s), before_marker), s + 1)
    return text[s:end] if end <= _find_or(text, "\n", s, n) else None


def _dollar(text: str, n: int, s: int) -> int:
    """The smallest ``e > s`` where ``$`` matches: just before a final newline, else the end."""
    return n - 1 if n - 1 > s and text.endswith("\n") else n


def _space_before(text: str, low: int, marker: int) -> int:
    """Where the whitespace run ending at ``marker`` begins, but not before ``low``; past the end without marker."""
    if marker == -1:
        return len(text) + 1
    return low + len(text[low:marker].rstrip())


def _find_or(text: str, needle: str, start: int, missing: int) -> int:
    found = text.find(needle, start)
    return missing if found == -1 else found


# --------------------------------------------------------------------------------------------------------------------
# Safe numeric evaluation
# --------------------------------------------------------------------------------------------------------------------


def safe_eval_number(expr: str) -> float | None:
    """The value of a small arithmetic expression, or ``None`` when it is not a safely evaluable finite number.

    Nothing is ever executed: the text is parsed into a tree and only whitelisted nodes are interpreted.
    """
    if not isinstance(expr, str):
        return None
    text = expr.partition(_AROUND)[0].strip()
    if not text or len(text) > MAX_EXPR_CHARS:
        return None
    try:
        tree = ast.parse(text, mode="eval")
        if not _within_bounds(tree):
            return None
        value = float(_evaluate(tree.body))
    except (_Unsafe, SyntaxError, ValueError, TypeError, ArithmeticError, RecursionError, MemoryError):
        return None
    return value if math.isfinite(value) else None


def _within_bounds(tree: ast.AST) -> bool:
    """Whether the tree is small and shallow enough to interpret recursively (checked without recursion)."""
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_AST_NODES or depth > MAX_AST_DEPTH:
            return False
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return True


def _evaluate(node: ast.AST) -> _Number:
    if isinstance(node, ast.Constant):
        return _constant(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        operand = _evaluate(node.operand)
        return _checked(-operand if isinstance(node.op, ast.USub) else +operand)
    if isinstance(node, ast.BinOp):
        return _binary(node.op, _evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and len(node.args) == 1
        and not node.keywords
        and not isinstance(node.args[0], ast.Starred)
    ):
        argument = _evaluate(node.args[0])
        if argument < 0:
            raise _Unsafe("square root of a negative number")
        return _checked(math.sqrt(float(argument)))
    raise _Unsafe(f"not allowed: {type(node).__name__}")


def _constant(value: object) -> _Number:
    # ``type(...) is`` on purpose: bool is an int subclass, and complex/str/bytes/None are not numbers here.
    if type(value) is int:
        return _checked(Fraction(value))
    if type(value) is float:
        if not math.isfinite(value):
            raise _Unsafe("literal out of range")
        # The decimal the literal spells (``0.03``, not the nearest double), so ``0.03 % 0.01`` is 0 as for sympy.
        return _checked(Fraction(repr(value)))
    raise _Unsafe(f"not a real number literal: {type(value).__name__}")


def _binary(op: ast.operator, left: _Number, right: _Number) -> _Number:
    if isinstance(op, ast.Add):
        return _checked(left + right)
    if isinstance(op, ast.Sub):
        return _checked(left - right)
    if isinstance(op, ast.Mult):
        return _checked(left * right)
    if isinstance(op, ast.Div):
        return _checked(left / right)
    if isinstance(op, ast.Mod):
        return _checked(left % right)
    if isinstance(op, ast.Pow):
        return _checked(_power(left, right))
    raise _Unsafe(f"operator not allowed: {type(op).__name__}")


def _power(base: _Number, exponent: _Number) -> _Number:
    if isinstance(exponent, Fraction) and exponent.denominator == 1:
        k = exponent.numerator
        if abs(k) > MAX_EXPONENT:
            raise _Unsafe("exponent too large")
        if isinstance(base, Fraction):
            if base == 0 and k < 0:
                raise _Unsafe("zero to a negative power")
            bits = max(base.numerator.bit_length(), base.denominator.bit_length())
            if bits * abs(k) > MAX_BITS:
                raise _Unsafe("power too large")
            return base**k
        return math.pow(base, k)
    x = float(exponent)
    b = float(base)
    if b < 0 and not x.is_integer():
        raise _Unsafe("non-real power")
    return math.pow(b, x)  # raises OverflowError / ValueError instead of returning inf or complex


def _checked(value: _Number) -> _Number:
    if isinstance(value, Fraction):
        if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
            raise _Unsafe("value too large")
        return value
    if not isinstance(value, float) or not math.isfinite(value):
        raise _Unsafe("not a finite real number")
    return value


# --------------------------------------------------------------------------------------------------------------------
# Comparison and reward
# --------------------------------------------------------------------------------------------------------------------


def _normalize_option(option: str) -> str:
    return _OPTION_NOISE.sub("", option)


def _is_option(result: str) -> bool:
    return _normalize_option(result) in _OPTION_LETTERS


def is_correct(prediction: str | None, truth: str | None, rel_tol: float = DEFAULT_REL_TOL) -> bool:
    """Whether ``prediction`` matches ``truth``: same text, same option letter, or numerically close.

    When the truth is an option letter (``"C"``, ``"(C)"``), only the same letter (case-sensitive, ignoring spaces
    and parentheses) counts. Otherwise both sides are evaluated with :func:`safe_eval_number` and compared with
    :func:`math.isclose`. Never raises.
    """
    try:
        pred = "" if prediction is None else str(prediction)
        true = "" if truth is None else str(truth)
        if pred.strip() == true.strip():
            return True
        if _is_option(true):
            return _normalize_option(pred) == _normalize_option(true)
        pred_value = safe_eval_number(pred)
        if pred_value is None:
            return False
        true_value = safe_eval_number(true)
        if true_value is None:
            return False
        return math.isclose(pred_value, true_value, rel_tol=rel_tol)
    except Exception:
        return False


def reward(text: str | None, truth: str) -> float:
    """1.0 when the answer extracted from ``text`` is correct for ``truth``, else 0.0 (also when there is none)."""
    answer = extract_answer(text)
    if answer is None:
        return 0.0
    return 1.0 if is_correct(answer, truth) else 0.0
