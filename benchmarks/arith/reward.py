"""Reward of the arith benchmark: the agent answers with an equation, and its right-hand side is the answer.

The answer is the whole number that follows the first ``=`` of the reply (``5 + 3 = 8.`` answers 8); a reply whose
first ``=`` is not followed by a whole number, or that has none, has no answer. Text after the number is ignored.
"""

from __future__ import annotations

import re

__all__ = ["closeness", "extract_answer", "is_correct", "reward"]

_ANSWER = re.compile(r"=[ \t]*([+-]?\d{1,12})(?![\d.]*\d)")


def extract_answer(text: str | None) -> str | None:
    """The whole number right after the first ``=`` of ``text`` (``None`` without one)."""
    if not isinstance(text, str):
        return None
    first = text.find("=")
    if first == -1:
        return None
    match = _ANSWER.match(text, first)
    return match.group(1) if match else None


def is_correct(answer: str | None, truth: str) -> bool:
    return answer is not None and int(answer) == int(truth)


def reward(text: str | None, truth: str) -> float:
    return 1.0 if is_correct(extract_answer(text), truth) else 0.0


def closeness(text: str, truth: str) -> float:
    """Partial credit in [0, 1]: ``1 / (1 + |answer - truth|)``, 0 without an answer."""
    answer = extract_answer(text)
    return 0.0 if answer is None else 1.0 / (1.0 + abs(int(answer) - int(truth)))
