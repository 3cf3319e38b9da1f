"""Dual control (τ² telecom): the simulated user has tools of its own, acting on its phone in the agent's environment.

Agent Framework lab's ``TaskRunner`` is single-control: its assistant gets a fresh environment, its user simulator
no tools, it never applies a task's initial state, and its record of the conversation is the assistant's history,
which holds none of the user's tool calls. :class:`DualControlRunner` extends it with τ²'s own pieces, as τ²'s
``run_task`` and ``Orchestrator`` use them:

- **One environment per conversation**, the domain's from τ²'s registry, set to the task's initial state by
  ``Environment.set_state`` with the task's initialization data and actions (what ``Orchestrator.initialize``
  does; telecom's tasks break the user's phone this way: airplane mode on, a SIM card unseated, roaming off).
- **Both sides' tools bound to it.** Each call is the environment's ``get_response`` for its requestor, which
  syncs the two sides after every call (``sync_tools``: a line the agent re-activates shows on the phone).
- **The user simulator as τ²'s ``UserSimulator`` with tools** is prompted: τ²'s tool-using guidelines and the
  scenario as τ²'s ``run_task`` gives it (``str(task.user_scenario)``: persona and instructions); the user's
  tools are its own (``Environment.get_user_tools``), answered as τ² answers them.
- **The conversation as it happened**: each reply of either side in order, the user's as the user's (role
  ``user`` with its tool calls, then their results), so τ²'s evaluator replays both sides' calls on the task's
  initial state. The assistant sees what it saw before: the user's words, never the user's tool calls.

This module imports the lab runner, and through it τ² and LiteLLM: it is loaded after ``compat.apply``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_framework import Agent, Message
from agent_framework_lab_tau2 import USER_SIMULATOR_ID, TaskRunner
from agent_framework_lab_tau2 import runner as lab_runner
from agent_framework_lab_tau2._sliding_window import SlidingWindowHistoryProvider

from harness.benchmark import load_module

_compat = load_module(Path(__file__).with_name("compat.py"), "harness_benchmark_tau2_compat")

ASSISTANT_PROMPT = "<instructions>\n{instructions}\n</instructions>\n<policy>\n{policy}\n</policy>"
"""The lab's assistant system prompt (``TaskRunner.assistant_agent``): its instructions and the domain's policy."""


def initial_environment(domain: str, task: Any) -> Any:
    """The domain's τ² environment set to ``task``'s initial state, as τ²'s orchestrator sets it. A task that
    begins mid-conversation (``initial_state.message_history``; none of τ²'s airline, retail or telecom tasks does)
    is refused: every conversation here begins with the agent's greeting."""
    from tau2.registry import registry

    environment = registry.get_env_constructor(domain)()
    state = task.initial_state
    if state is not None and state.message_history:
        raise ValueError(f"task {task.id}: it begins mid-conversation (initial_state.message_history)")
    environment.set_state(
        initialization_data=state.initialization_data if state is not None else None,
        initialization_actions=state.initialization_actions if state is not None else None,
        message_history=[],
    )
    return environment


def as_users(messages: list[Message]) -> list[Message]:
    """The user simulator's reply as the conversation's: its own turns (``assistant`` in its chat) become the
    user's, tool calls included; its tools' results stay tool messages."""
    out = []
    for message in messages:
        role = str(message.role)
        if role == "assistant":
            message = Message(role="user", contents=list(message.contents), message_id=message.message_id)
        if role in ("assistant", "tool"):
            out.append(message)
    return out


class DualControlRunner(TaskRunner):  # type: ignore[misc]
    """The lab's runner for a domain whose user has tools: one environment for both sides, set to the task's
    initial state; the user simulator prompted and equipped as τ²'s; the conversation recorded as it happened."""

    def __init__(self, *args: Any, domain: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.domain = domain
        self.environment: Any = None
        self.recorded: list[Message] = []

    def assistant_agent(self, assistant_chat_client: Any) -> Any:
        """The lab's assistant (its prompt, history window and temperature), with the conversation's environment."""
        env = self.environment
        tools = [_compat.tau2_function_tool(tool, env, "assistant") for tool in env.get_tools()]
        prompt = ASSISTANT_PROMPT.format(instructions=lab_runner.ASSISTANT_AGENT_INSTRUCTION, policy=env.get_policy())
        window = SlidingWindowHistoryProvider(
            system_message=prompt,
            tool_definitions=[lab_runner._get_openai_schema(tool) for tool in tools],
            max_tokens=self.assistant_window_size,
        )
        return Agent(
            client=assistant_chat_client,
            instructions=prompt,
            tools=tools,
            default_options={"temperature": self.assistant_sampling_temperature},
            context_providers=[window],
        )

    def user_simulator(self, user_simuator_chat_client: Any, task: Any) -> Any:
        """τ²'s user simulator with tools: its system prompt and the user's tools on the conversation's environment
        (the lab's user-simulator agent otherwise: temperature 0, the whole conversation in its history)."""
        from tau2.user.user_simulator import UserSimulator

        env = self.environment
        user_tools = env.get_user_tools()
        prompt = UserSimulator(tools=user_tools, instructions=str(task.user_scenario)).system_prompt
        return Agent(
            client=user_simuator_chat_client,
            instructions=prompt,
            tools=[_compat.tau2_function_tool(tool, env, "user") for tool in user_tools],
            default_options={"temperature": 0.0},
        )

    def should_not_stop(self, response: Any) -> bool:
        """Record each reply as it arrives (every reply, the last included, passes here once), then the lab's
        termination checks."""
        messages = list(response.agent_response.messages)
        self.recorded.extend(as_users(messages) if response.executor_id == USER_SIMULATOR_ID else messages)
        return bool(super().should_not_stop(response))

    async def run(self, task: Any, assistant_chat_client: Any, user_simulator_chat_client: Any) -> list[Message]:
        """The lab's conversation on the task's initial state; returned as recorded, the user's tool calls in it."""
        self.environment = initial_environment(self.domain, task)
        self.recorded = []
        conversation = await super().run(task, assistant_chat_client, user_simulator_chat_client)
        return [conversation[0], *self.recorded]  # the greeting, then every reply
