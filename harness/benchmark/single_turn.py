"""A single-turn benchmark from two methods: ``prompt(task)`` (what the model is asked) and ``score(text, task)``
(the task reward of its reply).

The rollout (one chat completion with the spec's ``agent.instructions`` as the system message), the episode's
record (messages, tokens, latency, pass or fail), and the ``trl-grpo`` hooks (the training prompt, the completion's
score) are derived from them, so the reward is written once and evaluation and training share it.
"""

from __future__ import annotations

from abc import abstractmethod

from harness.benchmark.messages import Message, complete
from harness.benchmark.protocol import Benchmark, Episode, RolloutContext, Task, TrainsSingleTurn


class SingleTurnBenchmark(Benchmark, TrainsSingleTurn):
    """One reply per task, scored by :meth:`score` (required). Override :meth:`prompt` to phrase the task (default:
    the task's prompt as it is) and :meth:`answer` to record an extracted answer."""

    def prompt(self, task: Task) -> str:
        """The user message for ``task``."""
        return task.prompt

    @abstractmethod
    def score(self, text: str, task: Task) -> float:
        """The task reward of a reply ``text``: 1 for a pass."""

    def answer(self, text: str) -> str | None:
        """The answer extracted from a reply, recorded with the episode (default: none)."""
        return None

    def messages(self, task: Task) -> list[Message]:
        """What the model is asked: ``agent.instructions`` as the system message (when set), then :meth:`prompt`."""
        system = self.spec.agent.instructions
        user = [Message(role="user", content=self.prompt(task))]
        return [Message(role="system", content=system), *user] if system else user

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.content or ""} for m in self.messages(task)]

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        messages = self.messages(task)
        reply = await complete(ctx, messages)
        reward = float(self.score(reply.text, task))
        return Episode(
            task_id=task.id,
            reward=reward,
            passed=self.passed(reward),
            answer=self.answer(reply.text),
            messages=[m.record() for m in [*messages, reply.message]],
            turns=1,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
        )
