"""One-step whole-number arithmetic, answered with an equation whose right-hand side is the result (``5 + 3 = 8``).

Small enough that SmolLM2-135M solves some tasks untrained, so a few minutes of GRPO on a CPU have a signal.
"""

import re

from harness.benchmark import Episode, SingleTurnBenchmark, Task, register_benchmark

EQUATION = re.compile(r"=[ \t]*([+-]?\d{1,12})(?![\d.]*\d)")


def answer_of(text: str) -> int | None:
    """The whole number right after the first ``=`` of ``text`` (None without one)."""
    first = text.find("=")
    match = EQUATION.match(text, first) if first != -1 else None
    return int(match.group(1)) if match else None


@register_benchmark
class Arith(SingleTurnBenchmark):
    prompt_field, answer_field = "question", "result"
    shaping_terms = ("format_reward", "partial_credit")

    def score(self, text: str, task: Task) -> float:
        return float(answer_of(text) == int(task.answer))

    def answer(self, text: str) -> str | None:
        got = answer_of(text)
        return None if got is None else str(got)

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """``format_reward``: the reply is an equation with a whole-number result; ``partial_credit``: 1 / (1 +
        its distance from the answer)."""
        got = answer_of(episode.final_text)
        closeness = 0.0 if got is None else 1 / (1 + abs(got - int(task.answer)))
        return {"format_reward": float(got is not None), "partial_credit": closeness}
