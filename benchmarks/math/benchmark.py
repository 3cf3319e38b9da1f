"""The math benchmark: an Agent Framework agent with the MCP calculator answers Calc-X word problems."""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

from harness.benchmark import (
    Benchmark,
    Episode,
    Message,
    RolloutContext,
    Task,
    TrainsSingleTurn,
    calculate,
    load_module,
    message_record,
    open_calculator,
    readable_functions,
    register_benchmark,
)

_reward = load_module(Path(__file__).with_name("reward.py"), "harness_benchmark_math_reward")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?")


@register_benchmark
class MathBenchmark(Benchmark, TrainsSingleTurn):
    shaping_terms: ClassVar[tuple[str, ...]] = ("format_reward", "partial_credit")

    prompt_field, answer_field = "question", "result"

    @contextlib.asynccontextmanager
    async def resources(self) -> AsyncIterator[Any]:
        async with open_calculator() as calculator:
            yield calculator

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        from agent_framework import Agent
        from agent_framework.openai import OpenAIChatCompletionClient

        client = OpenAIChatCompletionClient(model=ctx.model, async_client=ctx.client)
        client.function_invocation_configuration["max_iterations"] = ctx.max_turns
        agent = Agent(client=client, name="MathAgent", instructions=self.spec.agent.instructions)
        started = time.perf_counter()
        response = await agent.run(
            task.prompt,
            tools=readable_functions(ctx.resources),
            options={"temperature": ctx.temperature, "max_tokens": ctx.max_tokens, "seed": ctx.seed},
        )
        latency = time.perf_counter() - started
        messages = [Message(role="user", content=task.prompt).record()] + [message_record(m) for m in response.messages]
        final = response.messages[-1].text if response.messages else ""
        reward = self.score(final, task)
        usage = response.usage_details or {}
        return Episode(
            task_id=task.id,
            reward=reward,
            passed=self.passed(reward),
            answer=_reward.extract_answer(final),
            messages=messages,
            tool_calls=sum(len(m.tool_calls) for m in messages),
            turns=sum(1 for m in messages if m.role == "assistant"),
            prompt_tokens=int(usage.get("input_token_count") or 0),
            completion_tokens=int(usage.get("output_token_count") or 0),
            latency_s=latency,
        )

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.spec.agent.instructions},
            {"role": "user", "content": task.prompt},
        ]

    def training_tools(self) -> list[Callable[..., Any]]:
        state: dict[str, Any] = {}

        async def calculate_tool(expression: str) -> str:
            """Calculates/evaluates the given expression.

            Args:
                expression: The math expression to evaluate, e.g. "3 * (4 + 5)".
            """
            if "tool" not in state:
                stack = contextlib.AsyncExitStack()
                state["tool"] = await stack.enter_async_context(open_calculator())
                state["stack"] = stack
            return await calculate(state["tool"], expression)

        calculate_tool.__name__ = "calculate"
        return [calculate_tool]

    def score(self, text: str, task: Task) -> float:
        """1 when the answer after ``###`` is the task's result (reward.py), else 0."""
        return float(_reward.reward(text, task.answer))

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """``format_reward``: the final text has a ``###`` answer; ``partial_credit``: closeness of its last number
        to a numeric answer, 1 / (1 + |ln(pred / truth)|)."""
        final = episode.final_text
        return {
            "format_reward": float(_reward.extract_answer(final) is not None),
            "partial_credit": _closeness(final, task),
        }


def _closeness(completion: str, task: Task) -> float:
    truth = _reward.safe_eval_number(task.answer)
    numbers = _NUMBER.findall(completion[-2000:])
    if truth is None or not numbers:
        return 0.0
    pred = _reward.safe_eval_number(numbers[-1])
    if pred is None:
        return 0.0
    if truth == 0 or pred == 0 or (pred > 0) != (truth > 0):
        return 1.0 / (1.0 + abs(pred - truth))
    return 1.0 / (1.0 + abs(math.log(abs(pred) / abs(truth))))
