"""τ² telecom (dual control): the profiles' data, and each piece of ``benchmarks/tau2/dual_control.py`` and of the
telecom shims in ``compat.py`` against τ²'s own classes. Each test fails when its piece stops working, and where
the piece works around the lab runner, when the lab's behaviour it works around is gone (fast: no servers, except
one scripted conversation on loopback)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.assets.data import load_split
from harness.benchmark import MessageRecord, ToolResultRecord, load_module
from harness.rollout.loading import open_benchmark
from support import REPO
from support_tau2 import ScriptedEndpoint, oracle_reply, tau2_task, user_reply

TAU2 = REPO / "benchmarks" / "tau2"


@pytest.fixture(scope="module")
def telecom() -> Iterator[Any]:
    """The ``telecom`` profile's benchmark (shims applied) and its 114 tasks, train then test. The lab runner is
    pointed back at airline, its default, afterwards."""
    _spec, bench, _ = open_benchmark("tau2", "telecom")
    rows = [r for split in ("train", "test") for r in load_split(bench.spec.dataset, split)[0]]
    yield bench, bench.tasks(rows)
    _compat().use_domain("airline")


@pytest.fixture(scope="module")
def dual(telecom: Any) -> Any:
    """``dual_control.py`` (loaded once the shims are applied: it imports the lab runner)."""
    return load_module(TAU2 / "dual_control.py", "harness_benchmark_tau2_dual_control")


def _compat() -> Any:
    return load_module(TAU2 / "compat.py", "harness_benchmark_tau2_compat")


def _first(tasks: list[Any], wanted: Any) -> Any:
    """The first τ² task of ``tasks`` for which ``wanted(task)`` holds."""
    return next(t for t in map(tau2_task, tasks) if wanted(t))


def _initial(task: Any) -> set[tuple[str, str]]:
    return {(a.env_type, a.func_name) for a in task.initial_state.initialization_actions}


def _expected(task: Any) -> set[tuple[str, str]]:
    return {(a.requestor, a.name) for a in task.evaluation_criteria.actions or []}


def _client() -> Any:
    import openai
    from agent_framework.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(
        model="m", async_client=openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="none")
    )


def test_telecom_splits_are_seeded_halves_of_tau2s_base_tasks(telecom: Any) -> None:
    """``telecom``: τ²'s 114 ``base`` tasks (what τ²'s ``get_tasks`` gives by default) split by random.Random(42)
    as airline and retail are; ``telecom-tau2-split`` is τ²'s own 74/40 of the same tasks."""
    from tau2.domains.telecom.environment import get_tasks, get_tasks_split

    bench, _ = telecom
    base = get_tasks_split()["base"]
    order = list(range(len(base)))
    random.Random(42).shuffle(order)
    train, origin = load_split(bench.spec.dataset, "train")
    test, _ = load_split(bench.spec.dataset, "test")
    assert [r["id"] for r in train] == [base[i] for i in order[:57]]
    assert [r["id"] for r in test] == [base[i] for i in order[57:]]
    assert {t.id for t in get_tasks()} == set(base) and len(base) == 114
    assert origin.sha256 == "37e562e1ae3242577407e1303b1548bc64e7ea68e37d36173e6747990ceaf8a4"
    own, _, _ = open_benchmark("tau2", "telecom-tau2-split")
    split = get_tasks_split()
    assert [r["id"] for r in load_split(own.dataset, "train")[0]] == split["train"]
    assert [r["id"] for r in load_split(own.dataset, "test")[0]] == split["test"]
    smoke, smoke_bench, _ = open_benchmark("tau2", "telecom-smoke")
    assert smoke.dataset == bench.spec.dataset and smoke_bench.options.domain == "telecom"


def test_the_initial_state_is_the_one_tau2s_orchestrator_sets(telecom: Any, dual: Any) -> None:
    """The conversation's environment is set to the task's initial state exactly as τ²'s ``Orchestrator`` sets it
    (both databases, the phone included); a task that begins mid-conversation is refused."""
    from tau2.agent.llm_agent import LLMAgent
    from tau2.orchestrator.orchestrator import Orchestrator
    from tau2.registry import registry
    from tau2.user.user_simulator import UserSimulator

    _, tasks = telecom
    task = _first(tasks, lambda t: ("user", "turn_airplane_mode_on") in _initial(t))
    ours = dual.initial_environment("telecom", task)
    env = registry.get_env_constructor("telecom")()
    fresh = (env.get_db_hash(), env.get_user_db_hash())
    agent = LLMAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="none")
    user = UserSimulator(tools=env.get_user_tools(), instructions=str(task.user_scenario), llm="none")
    Orchestrator(domain="telecom", agent=agent, user=user, environment=env, task=task).initialize()
    assert (ours.get_db_hash(), ours.get_user_db_hash()) == (env.get_db_hash(), env.get_user_db_hash()) != fresh
    assert "Airplane Mode" in ours.use_user_tool("check_status_bar")
    resumed = task.model_copy(deep=True)
    resumed.initial_state.message_history = [{"role": "assistant", "content": "Hi! How can I help you today?"}]
    with pytest.raises(ValueError, match="mid-conversation"):
        dual.initial_environment("telecom", resumed)


def _answer(tool: Any, arguments: dict[str, Any]) -> str:
    return "".join(c.text or "" for c in asyncio.run(tool.invoke(arguments=arguments)))


def test_both_sides_tools_run_in_one_environment_as_tau2s_get_response(telecom: Any, dual: Any) -> None:
    """Each side's tools answer as τ²'s ``Environment.get_response`` does for that side and sync the two sides after
    every call: the line the agent opens to roaming shows on the user's phone at once. The same calls through τ²'s
    own environment give the same answers and the same two databases."""
    from tau2.data_model.message import ToolCall

    _, tasks = telecom
    task = _first(tasks, lambda t: {("assistant", "enable_roaming"), ("user", "toggle_roaming")} <= _expected(t))
    line = next(a for a in task.evaluation_criteria.actions if a.name == "enable_roaming").arguments
    calls = [
        ("user", "toggle_roaming", {}),
        ("user", "check_status_bar", {}),
        ("assistant", "enable_roaming", line),
        ("user", "run_speed_test", {}),
        ("user", "toggle_roaming", {"unexpected": 1}),  # τ²'s error text, as get_response answers it
        ("assistant", "get_customer_by_id", {"customer_id": "nobody"}),
    ]
    env, theirs = dual.initial_environment("telecom", task), dual.initial_environment("telecom", task)
    compat = _compat()
    tools = {
        side: {t.name: compat.tau2_function_tool(t, env, side) for t in tools}
        for side, tools in (("assistant", env.get_tools()), ("user", env.get_user_tools()))
    }
    answers = [_answer(tools[side][name], args) for side, name, args in calls]
    expected = [theirs.get_response(ToolCall(id="c", name=n, arguments=a, requestor=s)).content for s, n, a in calls]
    assert answers == expected
    assert (env.get_db_hash(), env.get_user_db_hash()) == (theirs.get_db_hash(), theirs.get_user_db_hash())
    assert env.user_tools.db.surroundings.roaming_allowed
    assert answers[4].startswith("Error: ") and answers[5].startswith("Error: ")
    # Needed: the tool alone (what the single-control domains run) leaves the phone as it was until a sync.
    bare = dual.initial_environment("telecom", task)
    enable = next(t for t in bare.get_tools() if t.name == "enable_roaming")
    _answer(compat.tau2_function_tool(enable), line)
    assert not bare.user_tools.db.surroundings.roaming_allowed


def test_the_assistant_is_the_labs_on_the_conversations_environment(telecom: Any, dual: Any) -> None:
    """Our assistant is the lab's (its prompt, tools as the model sees them, temperature, history window) with the
    conversation's environment. When this fails, the lab builds its assistant otherwise: follow it in
    ``DualControlRunner.assistant_agent``."""
    from agent_framework_lab_tau2 import TaskRunner

    _, tasks = telecom
    _compat().use_domain("telecom")
    runner = dual.DualControlRunner(max_steps=10, assistant_window_size=11000, domain="telecom")
    runner.environment = dual.initial_environment("telecom", tau2_task(tasks[0]))
    ours = runner.assistant_agent(_client())
    lab = TaskRunner(max_steps=10, assistant_window_size=11000).assistant_agent(_client())

    def seen(agent: Any) -> tuple[Any, ...]:
        (window,) = agent.context_providers
        tools = [(t.name, t.description, t.parameters()) for t in agent.default_options["tools"]]
        options = {k: v for k, v in agent.default_options.items() if k != "tools"}
        return options, tools, window.system_message, window.tool_definitions, window.max_tokens, type(window)

    assert seen(ours) == seen(lab)
    assert "<tech_support_policy>" in ours.default_options["instructions"]
    assert ours.default_options["tools"][0].func is not lab.default_options["tools"][0].func


def test_the_user_simulator_is_tau2s_with_its_tools(telecom: Any, dual: Any) -> None:
    """The user simulator is prompted as τ²'s ``UserSimulator`` with tools (tool-using guidelines, persona and
    instructions) and has τ²'s user tools; the lab's has neither (when it has, this runner may go)."""
    from agent_framework_lab_tau2 import TaskRunner
    from tau2.user.user_simulator import UserSimulator, get_global_user_sim_guidelines

    _, tasks = telecom
    task = _first(tasks, lambda t: t.user_scenario.persona is not None)
    runner = dual.DualControlRunner(max_steps=10, domain="telecom")
    runner.environment = dual.initial_environment("telecom", task)
    user = runner.user_simulator(_client(), task)
    user_tools = runner.environment.get_user_tools()
    prompt = UserSimulator(tools=user_tools, instructions=str(task.user_scenario)).system_prompt
    assert user.default_options["instructions"] == prompt
    assert get_global_user_sim_guidelines(use_tools=True) in prompt
    assert "Persona:" in prompt and task.user_scenario.persona.split(",")[0].strip() in prompt
    assert [t.name for t in user.default_options["tools"]] == [t.name for t in user_tools]
    assert user.default_options["temperature"] == 0.0
    lab = TaskRunner(max_steps=10).user_simulator(_client(), task)
    assert not lab.default_options["tools"] and "You have some tools" not in lab.default_options["instructions"]


def test_a_result_of_the_users_call_is_the_users() -> None:
    """τ² messages mark the result of the user's own tool call as the user's; the lab's conversion marks it the
    assistant's (when it no longer does, ``compat.tau2_messages`` may go)."""
    from agent_framework import Content, Message
    from agent_framework_lab_tau2._tau2_utils import convert_agent_framework_messages_to_tau2_messages as lab

    talk = [
        Message(role="user", contents=[Content.from_function_call("u1", "check_status_bar", arguments={})]),
        Message(role="tool", contents=[Content.from_function_result("u1", result="Status Bar: 📵 No Signal")]),
        Message(role="assistant", contents=[Content.from_function_call("a1", "get_customer_by_id", arguments={})]),
        Message(role="tool", contents=[Content.from_function_result("a1", result="Error: not found")]),
    ]
    ours = _compat().tau2_messages(talk)
    assert [(m.role, getattr(m, "requestor", None)) for m in ours] == [
        ("user", None),
        ("tool", "user"),
        ("assistant", None),
        ("tool", "assistant"),
    ]
    assert ours[0].tool_calls[0].requestor == "user"
    assert [getattr(m, "requestor", None) for m in lab(talk)][1] == "assistant"


def test_the_conversation_records_the_users_calls_as_the_users(telecom: Any) -> None:
    """One scripted telecom conversation through the benchmark's runner: the user's tool calls are recorded as the
    user's (role ``user`` with the calls, then their results), in order between the agent's messages, and τ²'s
    messages mark them and their results as the user's; with them left out, the record is the lab's own (the
    assistant's history after the greeting, then the user's last words)."""
    import openai
    from agent_framework import InMemoryHistoryProvider
    from agent_framework.openai import OpenAIChatCompletionClient

    from harness.benchmark import message_record
    from harness.benchmark.protocol import RolloutContext

    bench, tasks = telecom
    wanted = {("assistant", "enable_roaming"), ("user", "reboot_device")}
    task = next(t for t in tasks if _expected(tau2_task(t)) >= wanted)
    with ScriptedEndpoint(oracle_reply([task])) as policy, ScriptedEndpoint(user_reply([task])) as user:
        ctx = RolloutContext(
            base_url=policy.base_url,
            model="oracle",
            temperature=0.0,
            max_tokens=64,
            max_turns=10,
            request_timeout_s=30,
            seed=0,
        )
        runner = bench._runner(ctx)
        clients = [
            OpenAIChatCompletionClient(model=name, async_client=openai.AsyncOpenAI(base_url=url, api_key="none"))
            for name, url in (("oracle", policy.base_url), ("user", user.base_url))
        ]
        conversation = asyncio.run(runner.run(tau2_task(task), *clients))
    assert runner.termination_reason.value == "user_stop"
    records = [message_record(m) for m in conversation]
    user_calls = {c.call_id for m in records if m.role == "user" for c in m.tool_calls}
    assert len(user_calls) == sum(a.requestor == "user" for a in tau2_task(task).evaluation_criteria.actions) > 0
    for i, m in enumerate(records):
        if m.role == "user" and m.tool_calls:
            assert [_call_id(r) for r in records[i + 1].tool_results] == [c.call_id for c in m.tool_calls]
    history = runner._assistant_executor._session.state[InMemoryHistoryProvider.DEFAULT_SOURCE_ID]["messages"]
    lab_view = [message_record(m) for m in [conversation[0], *history, *runner._final_user_message]]
    assert [m for m in records if not _users_own(m, user_calls)] == lab_view
    tau2 = [m.model_dump(mode="json") for m in _compat().tau2_messages(conversation)]
    assert {m["id"] for m in tau2 if m["role"] == "tool" and m["requestor"] == "user"} == user_calls
    calls = [c for m in tau2 if m["role"] == "user" for c in m["tool_calls"] or []]
    assert {c["id"] for c in calls} == user_calls and all(c["requestor"] == "user" for c in calls)


def _users_own(record: MessageRecord, user_calls: set[str | None]) -> bool:
    """A record of the user's tool call(s) or of their results."""
    if record.role == "user":
        return bool(record.tool_calls)
    return any(_call_id(r) in user_calls for r in record.tool_results)


def _call_id(result: ToolResultRecord | str) -> str | None:
    """The id of the call a recorded result answers (None for a result recorded as text only)."""
    return result.call_id if isinstance(result, ToolResultRecord) else None


def test_telecom_refuses_the_transcript_framing(telecom: Any) -> None:
    """The transcript framing shows the simulator words only; telecom's user must see its tools' results."""
    bench, _ = telecom
    options = {**bench.options.model_dump(), "user_framing": "transcript"}
    with pytest.raises(ValueError, match="telecom's user has tools"):
        type(bench.options).model_validate(options)
    type(bench.options).model_validate({**options, "domain": "retail"})


def test_every_profiles_window_holds_its_policy(dual: Any) -> None:
    """The lab's history window counts the assistant's system prompt: where the prompt alone passes the window,
    the assistant is sent no conversation at all. Every profile's window holds its domain's prompt and room for
    the conversation (telecom's policy is 5240 tokens, past the 4000 of airline's window)."""
    import tiktoken
    from agent_framework_lab_tau2 import runner as lab_runner
    from tau2.registry import registry

    from harness.spec import load_spec

    encoding = tiktoken.get_encoding("o200k_base")
    profiles = yaml.safe_load((TAU2 / "spec.yaml").read_text())["profiles"]
    assert {"telecom", "telecom-smoke", "telecom-tau2-split", "retail", "full"} <= set(profiles)
    for profile in profiles:
        options = load_spec(TAU2 / "spec.yaml", profile).agent.options
        domain = str(options.get("domain", "airline"))
        policy = registry.get_env_constructor(domain)().get_policy()
        prompt = dual.ASSISTANT_PROMPT.format(instructions=lab_runner.ASSISTANT_AGENT_INSTRUCTION, policy=policy)
        assert len(encoding.encode(prompt)) + 100 < int(options.get("assistant_window", 4000)), profile


def test_telecom_smokes_requests_fit_smollm2s_context(dual: Any, smoke_model: Path) -> None:
    """``telecom-smoke``: τ²'s telecom prompt and tools take most of SmolLM2's 8192 tokens; the assistant's window
    keeps each request, with the reply, within ``max_model_len`` for a conversation of up to twice as many SmolLM2
    tokens as o200k tokens (0 conversation: the window would be useless; more: the server refuses the request)."""
    import tiktoken
    from agent_framework_lab_tau2 import runner as lab_runner
    from tau2.registry import registry
    from transformers import AutoTokenizer

    from harness.spec import load_spec

    spec = load_spec(TAU2 / "spec.yaml", "telecom-smoke")
    env = registry.get_env_constructor("telecom")()
    prompt = dual.ASSISTANT_PROMPT.format(instructions=lab_runner.ASSISTANT_AGENT_INSTRUCTION, policy=env.get_policy())
    tokenizer = AutoTokenizer.from_pretrained(smoke_model)
    tools = [t.openai_schema for t in env.get_tools()]
    text = tokenizer.apply_chat_template([{"role": "system", "content": prompt}], tools=tools, tokenize=False)
    fixed = len(tokenizer(text)["input_ids"])
    room = int(spec.agent.options["assistant_window"]) - len(tiktoken.get_encoding("o200k_base").encode(prompt)) - 4
    assert room >= 2 * int(spec.agent.options["user_max_tokens"])  # the greeting and the user's first message
    assert fixed + 2 * room + spec.evaluation.max_tokens <= spec.serving.max_model_len, (fixed, room)
