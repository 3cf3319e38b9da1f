"""VERL's agent loop driving the benchmark's Agent Framework agent (imported inside VERL's Ray workers).

``HarnessAgentLoop`` is registered with VERL through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
(the engine writes that file). For each sample VERL hands it, it reads the task from the row's ``extra_info`` (a
:class:`~harness.engines.verl.rows.TaskRow`), runs the benchmark's own rollout with the policy behind a
:class:`~harness.engines.verl.rollout.Trajectory` whose generator is VERL's vLLM server manager, and returns the
traced tokens with the benchmark's reward (plus the profile's shaping) and ``acc`` (the unshaped pass/fail, which
VERL reports as the validation score). A sample whose agent made no LLM call raises: training must not go on with
nothing to learn from.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from harness.benchmark.protocol import Benchmark, SimulatorContext
from harness.engines.shaping import Shaping
from harness.engines.verl.engine import SIMULATOR_KEY_ENV
from harness.engines.verl.rollout import Trajectory, traced_rollout
from harness.engines.verl.rows import TaskRow
from harness.engines.verl.traces import TraceLine, append_trace
from harness.rollout.loading import load_benchmark
from harness.spec import load_spec

AGENT_NAME = "harness_agent"
logger = logging.getLogger(__name__)


class _Runtime:
    """Per-worker state shared by every sample: the benchmark and its open resources (e.g. a tool server's session)."""

    def __init__(self, bench: Benchmark, resources: Any, stack: AsyncExitStack, row: TaskRow) -> None:
        self.bench = bench
        self.resources = resources
        self.stack = stack
        self.max_turns = row.max_turns
        self.max_tokens = row.max_tokens or None  # each reply's cap, as in evaluation
        self.shaping = Shaping.from_config(row.shaping_weights())
        self.simulator: SimulatorContext | None = None
        if row.simulator_url:  # the run's user simulator, served beside the policy and never trained
            import openai

            self.simulator = SimulatorContext(
                model=row.simulator_model,
                client=openai.AsyncOpenAI(
                    base_url=row.simulator_url,
                    api_key=os.environ.get(SIMULATOR_KEY_ENV) or "EMPTY",
                    max_retries=2,
                ),
            )


_RUNTIMES: dict[str, _Runtime] = {}
_LOCK: asyncio.Lock | None = None


async def _runtime(row: TaskRow) -> _Runtime:
    global _LOCK
    key = f"{row.spec_path}::{row.profile}"
    if key in _RUNTIMES:
        return _RUNTIMES[key]
    if _LOCK is None:
        _LOCK = asyncio.Lock()
    async with _LOCK:
        if key not in _RUNTIMES:
            spec_path = Path(row.spec_path)
            spec = load_spec(spec_path, row.profile)
            bench = load_benchmark(spec, spec_path.parent)
            stack = AsyncExitStack()
            resources = await stack.enter_async_context(bench.resources())
            _RUNTIMES[key] = _Runtime(bench, resources, stack, row)
    return _RUNTIMES[key]


@register(AGENT_NAME)
class HarnessAgentLoop(AgentLoopBase):  # type: ignore[misc]
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        row = TaskRow.read(kwargs["extra_info"])
        runtime = await _runtime(row)
        task = row.task()
        request_id = uuid.uuid4().hex
        server = self.server_manager
        # The rollout servers tag each output (e.g. the weight version it was generated with: min/max_global_steps);
        # VERL's trainer reads these tags, so keep the first call's and the latest max_global_steps, as its own
        # tool agent loop does.
        server_fields: dict[str, Any] = {}

        async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
            out = await server.generate(request_id=request_id, prompt_ids=prompt_ids, sampling_params=dict(params))
            fields = dict(getattr(out, "extra_fields", None) or {})
            if not server_fields:
                server_fields.update(fields)
            elif fields.get("max_global_steps") is not None:
                server_fields["max_global_steps"] = fields["max_global_steps"]
            return list(out.token_ids), (list(out.log_probs) if getattr(out, "log_probs", None) else None)

        response_length = int(self.rollout_config.response_length)
        trajectory = Trajectory(
            tokenizer=self.tokenizer,
            generate=generate,
            sampling_params=dict(sampling_params),
            response_budget=response_length,
            json_tool_calls=runtime.bench.spec.serving.json_tool_calls,
        )
        result = await traced_rollout(
            runtime.bench,
            task,
            trajectory,
            max_turns=runtime.max_turns,
            max_tokens=runtime.max_tokens,
            seed=row.seed,
            resources=runtime.resources,
            shaping=runtime.shaping,
            simulator=runtime.simulator,
        )
        if result.error:
            logger.warning("task %s: the agent stopped early: %s", task.id, result.error)
        prompt_ids = trajectory.prompt_ids
        prompt_length = int(self.rollout_config.prompt_length)
        if len(prompt_ids) > prompt_length:
            raise ValueError(f"task {task.id}: prompt of {len(prompt_ids)} tokens exceeds {prompt_length}")
        logprobs = trajectory.response_logprobs if trajectory.logprobs_complete else None
        summary = trajectory.summary()
        if os.environ.get("HARNESS_VERL_TRACE"):
            line = TraceLine(
                task_id=task.id,
                uid=str(kwargs.get("uid", "")),  # the sample's group (VERL's prompt id)
                validation=row.validation,
                reward=result.reward,
                task_reward=result.episode.reward if result.episode is not None else 0.0,
                passed=result.passed,
                error=result.error,
                messages=trajectory.messages,
                **summary,
            )
            append_trace(Path(os.environ["HARNESS_VERL_TRACE"]), line)
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=trajectory.response_ids[:response_length],
            response_mask=trajectory.response_mask[:response_length],
            response_logprobs=logprobs[:response_length] if logprobs else None,
            reward_score=result.reward,
            num_turns=len(trajectory.messages),
            metrics={"generate_sequences": sum(c.latency_s for c in trajectory.calls)},
            extra_fields={
                **server_fields,
                "reward_extra_info": {"acc": float(result.passed)},
                "llm_calls": summary["llm_calls"],
                "turn_scores": [],
                "tool_rewards": [],
            },
        )
