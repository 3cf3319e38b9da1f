"""A single-turn benchmark from two methods: ``prompt(task)`` (what the model is asked) and ``score(text, task)``
(the task reward of its reply).

The rollout (one chat completion with the spec's ``agent.instructions`` as the system message), the episode's
record (messages, tokens, latency, pass or fail), and the ``trl-grpo`` hooks (the training prompt, the completion's
score) are derived from them, so the reward is written once and evaluation and training share it.
"""

from __future__ import annotations

import time

from harness.rollout.protocol import Benchmark, Episode, RolloutContext, Task


class SingleTurnBenchmark(Benchmark):
    """One reply per task, scored by :meth:`score`. Override :meth:`prompt` to phrase the task (default: the task's
    prompt as it is) and :meth:`answer` to record an extracted answer."""

    def prompt(self, task: Task) -> str:
        """The user message for ``task``."""
        return task.prompt

    def score(self, text: str, task: Task) -> float:  # pragma: no cover - the subclass's
        raise NotImplementedError(f"{type(self).__name__} must define score(text, task)")

    def answer(self, text: str) -> str | None:
        """The answer extracted from a reply, recorded with the episode (default: none)."""
        return None

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        system = self.spec.agent.instructions
        user = [{"role": "user", "content": self.prompt(task)}]
        return [{"role": "system", "content": system}, *user] if system else user

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        messages = self.training_prompt(task)
        started = time.perf_counter()
        response = await ctx.client.chat.completions.create(
            model=ctx.model,
            messages=messages,
            temperature=ctx.temperature,
            max_tokens=ctx.max_tokens,
            seed=ctx.seed,
            timeout=ctx.request_timeout_s,
        )
        latency = time.perf_counter() - started
        text = (response.choices[0].message.content or "") if response.choices else ""
        reward = float(self.score(text, task))
        usage = response.usage
        asked = [{"role": m["role"], "text": m["content"]} for m in messages]
        return Episode(
            task_id=task.id,
            reward=reward,
            passed=self.passed(reward),
            answer=self.answer(text),
            messages=[*asked, {"role": "assistant", "text": text}],
            turns=1,
            prompt_tokens=int(usage.prompt_tokens) if usage else 0,
            completion_tokens=int(usage.completion_tokens) if usage else 0,
            latency_s=latency,
        )
