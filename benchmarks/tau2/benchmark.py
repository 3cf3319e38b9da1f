"""τ²-bench airline, retail and telecom: a customer-service agent talks to a fixed user simulator; τ²'s own evaluator
scores it.

The conversation is Agent Framework lab's τ² ``TaskRunner`` (assistant and user-simulator agents in a workflow);
the assistant is the served policy, the user simulator is the run's separate, never-trained endpoint
(``RolloutContext.simulator``). In telecom (dual control) the user simulator has tools of its own, acting on its
phone in the same environment, set to the task's initial state (``dual_control.py``). Scores are τ²'s
``evaluate_simulation`` reward; a conversation that fails because a server is unreachable is an infrastructure
error (retried, then excluded from pass rates), never a 0 reward.
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.benchmark import (
    Benchmark,
    BenchmarkSpec,
    Episode,
    RolloutContext,
    SpecError,
    Task,
    WritesNativeResults,
    cache_dir,
    load_module,
    message_record,
    register_benchmark,
)

_compat = load_module(Path(__file__).with_name("compat.py"), "harness_benchmark_tau2_compat")
_framing = load_module(Path(__file__).with_name("user_framing.py"), "harness_benchmark_tau2_user_framing")


def _dual_control() -> Any:
    """``dual_control.py``, loaded on first use: it imports the lab runner, so only after ``compat.apply``."""
    return load_module(Path(__file__).with_name("dual_control.py"), "harness_benchmark_tau2_dual_control")


class Tau2Options(BaseModel):
    """``agent.options`` of the τ² spec."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    domain: str = Field(
        "airline",
        pattern="^(airline|retail|telecom)$",
        description="τ² domain: airline or retail (single-control), telecom (dual control: the user has tools).",
    )
    max_steps: int = Field(100, gt=1, description="Most messages (both sides) before the conversation is cut.")
    assistant_window: int = Field(4000, gt=0, description="Token window of the assistant's history (o200k count).")
    user_max_tokens: int = Field(256, gt=0, description="Most tokens per user-simulator message.")
    user_framing: Literal["roles", "transcript"] = Field(
        "roles",
        description="How the user simulator is asked for its next message: roles (τ²'s, the chat with roles "
        "flipped) or transcript (the conversation written out, the reply continuing 'Customer:'; user_framing.py).",
    )

    @model_validator(mode="after")
    def _transcript_needs_single_control(self) -> Tau2Options:
        if self.user_framing == "transcript" and self.domain in _compat.DUAL_CONTROL:
            raise ValueError(f"user_framing transcript leaves out tool calls: {self.domain}'s user has tools")
        return self


@register_benchmark
class Tau2Benchmark(Benchmark, WritesNativeResults):
    shaping_terms: ClassVar[tuple[str, ...]] = ("tool_call_bonus", "action_credit")

    def __init__(self, spec: BenchmarkSpec, folder: Path) -> None:
        super().__init__(spec, folder)
        try:
            self.options = Tau2Options.model_validate(dict(spec.agent.options))
        except Exception as exc:  # pydantic's message, first line, with the key path
            raise SpecError(f"{folder / 'spec.yaml'}: agent.options: {str(exc).splitlines()[1:3]}") from None
        _compat.apply(cache_dir() / "tiktoken")
        self._tasks_by_id: dict[str, Task] = {}

    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        tasks = [Task(id=str(r["id"]), prompt=json.dumps(r), answer="", data=dict(r)) for r in rows]
        self._tasks_by_id.update({t.id: t for t in tasks})
        return tasks

    def _runner(self, ctx: RolloutContext) -> Any:
        from agent_framework_lab_tau2 import TaskRunner

        opts, user_max_tokens = self.options, self.options.user_max_tokens
        _compat.use_domain(opts.domain)
        dual = opts.domain in _compat.DUAL_CONTROL
        base = _dual_control().DualControlRunner if dual else TaskRunner

        class Runner(base):  # type: ignore[misc,valid-type]
            """The lab runner with the spec's token limits and seed on both agents."""

            def assistant_agent(self, client: Any) -> Any:
                agent = super().assistant_agent(client)
                agent.default_options["max_tokens"] = ctx.max_tokens
                if ctx.temperature == 0:
                    # A per-request seed with sampling crashes vLLM's CPU engine ("CPU Generator does not use
                    # offset"); greedy decoding is deterministic without one, sampled rollouts go unseeded.
                    agent.default_options["seed"] = ctx.seed
                return agent

            def user_simulator(self, client: Any, task: Any) -> Any:
                agent = super().user_simulator(client, task)
                agent.default_options.update(max_tokens=user_max_tokens, seed=0)
                return agent

        return Runner(
            max_steps=opts.max_steps,
            assistant_sampling_temperature=ctx.temperature,
            assistant_window_size=opts.assistant_window,
            **({"domain": opts.domain} if dual else {}),
        )

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        from agent_framework.openai import OpenAIChatCompletionClient
        from tau2.data_model.tasks import Task as Tau2Task

        if ctx.simulator is None:
            raise SpecError("tau2: the run has no user simulator (spec section user_simulator)")
        tau2_task = Tau2Task(**task.data)
        runner = self._runner(ctx)
        assistant = OpenAIChatCompletionClient(model=ctx.model, async_client=ctx.client)
        assistant.function_invocation_configuration["max_iterations"] = ctx.max_turns  # tool rounds per reply
        sim_client = ctx.simulator.client
        if self.options.user_framing == "transcript":
            sim_client = _framing.TranscriptClient(sim_client)
        user = OpenAIChatCompletionClient(model=ctx.simulator.model, async_client=sim_client)
        user.function_invocation_configuration["max_iterations"] = ctx.max_turns  # the user's tool rounds (telecom)
        started = time.perf_counter()
        conversation = await runner.run(tau2_task, assistant, user)
        latency = time.perf_counter() - started
        reward = float(runner.evaluate(tau2_task, conversation, runner.termination_reason))
        info = runner.full_reward_info
        termination = runner.termination_reason.value if runner.termination_reason else "too_many_errors"
        records = [message_record(m) for m in conversation]
        tau2_messages = _compat.tau2_messages(conversation)
        return Episode(
            task_id=task.id,
            sample=0,
            reward=reward,
            passed=self.passed(reward),  # τ²'s is_successful: the reward is 1 (to 1e-6)
            answer=termination,
            messages=records,
            tool_calls=sum(len(m.tool_calls) for m in records if m.role == "assistant"),  # the agent's
            turns=sum(1 for m in records if m.role == "assistant"),
            latency_s=latency,
            info={
                "termination_reason": termination,
                "reward_info": info.model_dump(mode="json") if info is not None else None,
                "action_checks": action_checks(tau2_task, tau2_messages, info),
                "tau2_messages": [m.model_dump(mode="json") for m in tau2_messages],
            },
        )

    def write_native_results(self, episodes: Sequence[Episode], path: Path, run: dict[str, Any]) -> None:
        """Write the phase in τ²'s own ``Results`` JSON, so τ²'s tools (metrics, viewer) read the run. Rollouts
        that ended in an infrastructure error are left out, as τ² leaves out simulations that never ran."""
        from tau2.data_model.simulation import (
            AgentInfo,
            Info,
            Results,
            RewardInfo,
            SimulationRun,
            TerminationReason,
            UserInfo,
        )
        from tau2.data_model.tasks import Task as Tau2Task
        from tau2.environment.environment import EnvironmentInfo

        env = importlib.import_module(f"tau2.domains.{self.options.domain}.environment").get_environment()
        by_id: dict[str, Any] = {}
        sims = []
        for ep in episodes:
            if ep.error_kind in ("infra", "timeout") or "tau2_messages" not in ep.info:
                continue
            by_id.setdefault(ep.task_id, None)
            reward_info = ep.info.get("reward_info")
            sims.append(
                SimulationRun(
                    id=f"{ep.task_id}-{ep.sample}",
                    task_id=ep.task_id,
                    start_time="",
                    end_time="",
                    duration=ep.latency_s,
                    termination_reason=TerminationReason(ep.info["termination_reason"]),
                    reward_info=RewardInfo.model_validate(reward_info) if reward_info else RewardInfo(reward=ep.reward),
                    messages=ep.info["tau2_messages"],
                    trial=ep.sample,
                    seed=run.get("seed"),
                )
            )
        tasks = [Tau2Task(**t.data) for t in self._tasks_by_id.values() if t.id in by_id]
        results = Results(
            info=Info(
                git_commit=str(run.get("git_commit", "")),
                num_trials=int(run.get("num_trials", 1)),
                max_steps=self.options.max_steps,
                max_errors=0,
                user_info=UserInfo(
                    implementation="agent_framework_lab_tau2.user_simulator",
                    llm=str(run.get("user_model", "")),
                    llm_args={"temperature": run.get("user_temperature", 0.0)},
                ),
                agent_info=AgentInfo(
                    implementation="agent_framework_lab_tau2.assistant_agent",
                    llm=str(run.get("policy_model", "")),
                    llm_args={"temperature": run.get("temperature", 0.0)},
                ),
                environment_info=EnvironmentInfo(domain_name=self.options.domain, policy=env.get_policy()),
                seed=run.get("seed"),
            ),
            tasks=tasks,
            simulations=sims,
        )
        path.write_text(results.model_dump_json(indent=2), encoding="utf-8")

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """``tool_call_bonus``: the assistant made at least one tool call; ``action_credit``: the share of τ²'s
        expected actions it matched (:func:`action_checks`: in a conversation cut at ``max_steps`` too)."""
        checks = episode.info.get("action_checks") or (episode.info.get("reward_info") or {}).get("action_checks")
        checks = checks or []
        matched = sum(bool(c.get("action_match")) for c in checks) / len(checks) if checks else 0.0
        return {"tool_call_bonus": float(episode.tool_calls > 0), "action_credit": matched}


def action_checks(task: Any, messages: Sequence[Any], info: Any) -> list[dict[str, Any]]:
    """τ²'s checks of the task's expected actions against the conversation's tool calls: the evaluator's own, or,
    where it made none because the conversation did not end (cut at ``max_steps``, reward 0 whatever was done),
    τ²'s ``ActionEvaluator`` on the conversation as it stands. For shaping only; the reward stays τ²'s."""
    if info is not None and info.action_checks:
        return [c.model_dump(mode="json") for c in info.action_checks]
    from tau2.evaluator.evaluator_action import ActionEvaluator

    golden = task.evaluation_criteria.actions if task.evaluation_criteria is not None else None
    if not golden:
        return []
    return [c.model_dump(mode="json") for c in ActionEvaluator.evaluate_actions(list(messages), golden)]
