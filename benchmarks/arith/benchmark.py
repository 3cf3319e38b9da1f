"""The arith benchmark: one-step whole-number arithmetic answered with an equation (``5 + 3 = 8``), no tools.

Small enough that SmolLM2-135M solves some tasks before training, so a few minutes of GRPO on a CPU have a
signal to learn from (the ``learn-cpu`` profile).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from harness.rollout.protocol import Benchmark, Episode, RolloutContext, Task, load_module, register_benchmark

_reward = load_module(Path(__file__).with_name("reward.py"), "harness_benchmark_arith_reward")


@register_benchmark
class ArithBenchmark(Benchmark):
    name: ClassVar[str] = "arith"
    shaping_terms: ClassVar[tuple[str, ...]] = ("format_reward", "partial_credit")

    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        return [Task(id=str(r["id"]), prompt=str(r["question"]), answer=str(r["result"]), data=dict(r)) for r in rows]

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
        final = response.choices[0].message.content or "" if response.choices else ""
        answer = _reward.extract_answer(final)
        passed = _reward.is_correct(answer, task.answer)
        usage = response.usage
        return Episode(
            task_id=task.id,
            sample=0,
            reward=1.0 if passed else 0.0,
            passed=passed,
            answer=answer,
            messages=[{"role": m["role"], "text": m["content"]} for m in messages]
            + [{"role": "assistant", "text": final}],
            turns=1,
            prompt_tokens=int(usage.prompt_tokens) if usage else 0,
            completion_tokens=int(usage.completion_tokens) if usage else 0,
            latency_s=latency,
        )

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.spec.agent.instructions},
            {"role": "user", "content": task.prompt},
        ]

    def score_completion(self, completion: str, task: Task) -> float:
        return float(_reward.reward(completion, task.answer))

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """``format_reward``: an equation whose right-hand side is a whole number (right or wrong);
        ``partial_credit``: how close that number is to the answer."""
        final = str(episode.messages[-1].get("text", "")) if episode.messages else ""
        return {
            "format_reward": float(_reward.extract_answer(final) is not None),
            "partial_credit": float(_reward.closeness(final, task.answer)),
        }
