"""Model text is data: answers and tool arguments never reach eval/exec/a shell; the calculator runs without network
and with memory and CPU limits.

A scripted OpenAI-compatible server (a real HTTP server) plays a hostile model: its tool calls carry code, shell
metacharacters and runaway arithmetic, and its final answers carry code too. They go through the real evaluation
path (``harness.rollout.evaluate`` -> the math benchmark's Agent Framework agent -> the real MCP calculator in its own
environment -> the real reward), and through the training engine's calculator tool. A marker file that any executed
payload would create must not exist, and the calculator must still answer afterwards.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from harness.benchmark import Task, ToolResultRecord
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import load_benchmark
from harness.spec import load_spec
from harness.tools.calculator import CALL_CPU_LIMIT_S, MEMORY_LIMIT_BYTES, calculate, open_calculator
from support import MATH_SPEC, REPO
from support_reliability import FIGURES, ScriptedModel, chat_completion


def hostile_expressions(marker: Path) -> list[str]:
    touch = f"touch {marker}"
    return [
        f"__import__('os').system('{touch}')",
        f"open('{marker}', 'w').write('x')",
        f"exec(\"open('{marker}', 'w')\")",
        f"eval(\"__import__('os').system('{touch}')\")",
        "().__class__.__bases__[0].__subclasses__()",
        "(lambda: 1)()",
        f"$({touch})",
        f"`{touch}`",
        f"1; {touch}",
        f"1 && {touch}",
        f"1 | tee {marker}",
        f"1 > {marker}",
        f"'; {touch}; '",
        "9**9**9",  # CPU: the package would compute this for minutes in its event loop
        "factorial(10**8)",
        "'a' * 10**10",  # memory: 10 GB
        "1" + "+1" * 50_000,
        "(" * 5_000 + "1" + ")" * 5_000,
    ]


ANSWERS = ["__import__('os').system('touch {m}')", "$(touch {m})", "`touch {m}`", "9**9**9**9", "open('{m}','w')"]


def _script(expressions: list[str], marker: Path) -> Any:
    """Task ``case-<i>``: first turn calls the calculator with expression i, then answers with a hostile text."""

    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        i = int(str(prompt).rsplit("-", 1)[1])
        if not any(m["role"] == "tool" for m in messages):
            call = {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "calculate", "arguments": json.dumps({"expression": expressions[i]})},
            }
            return chat_completion("scripted", None, [call])
        answer = ANSWERS[i % len(ANSWERS)].format(m=marker)
        return chat_completion("scripted", f"The result is computed.\n### {answer}")

    return reply


def test_hostile_tool_arguments_and_answers_run_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    expressions = [*hostile_expressions(marker), "2 + 3"]  # the last, benign one runs after all the others
    spec = load_spec(MATH_SPEC)
    bench = load_benchmark(spec, MATH_SPEC.parent)
    tasks = [Task(id=f"t{i}", prompt=f"case-{i}", answer="5") for i in range(len(expressions))]
    with ScriptedModel(_script(expressions, marker)) as model:
        settings = EvalSettings(
            base_url=model.base_url,
            model="scripted",
            temperature=0.0,
            max_tokens=64,
            max_turns=3,
            concurrency=2,
            samples_per_task=1,
            request_timeout_s=30,
            retries=0,
            seed=0,
        )
        started = time.monotonic()
        *episodes, last = asyncio.run(evaluate(bench, tasks, settings, tmp_path / "rollouts.jsonl"))
        elapsed = time.monotonic() - started
    FIGURES.add("hostile tool calls and answers from a model", 2 * (len(expressions) - 1))
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rollouts.jsonl"]
    assert len(episodes) == len(expressions) - 1
    for ep, expression in zip(episodes, expressions, strict=False):
        assert ep.error_kind == "", (expression[:60], ep.error)
        assert ep.reward == 0.0 and not ep.passed
        results = [r.result for m in ep.messages for r in m.tool_results if isinstance(r, ToolResultRecord)]
        assert len(results) == 1, ep.messages
        # an error, or (for a string literal) the literal itself: data in, data out
        assert "rror" in results[0] or results[0] == _literal(expression), (expression[:60], results[0][:200])
    # the calculator still answers after the hostile calls, and the scored answer is data, not code
    assert [r.result for m in last.messages for r in m.tool_results if isinstance(r, ToolResultRecord)] == ["5"]
    # each runaway expression costs at most its CPU limit, not minutes
    assert elapsed < 10 * CALL_CPU_LIMIT_S + 60, elapsed


# As GRPOTrainer runs async tools: on an event loop in a background thread that lives as long as the process.
TRAINING_TOOL = """
import asyncio, json, sys, threading
from pathlib import Path
from harness.rollout.loading import load_benchmark
from harness.spec import load_spec
spec_path = Path(sys.argv[1])
(tool,) = load_benchmark(load_spec(spec_path), spec_path.parent).training_tools()
loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()
outputs = [asyncio.run_coroutine_threadsafe(tool(x), loop).result() for x in json.loads(sys.argv[2])]
print(json.dumps(outputs), flush=True)
"""


def test_the_training_tool_runs_nothing(tmp_path: Path) -> None:
    """The calculator tool the training engine gives TRL (in a process of its own, as in the trainer): the same
    guards, and the error says which limit held."""
    marker = tmp_path / "pwned"
    expressions = [*hostile_expressions(marker), "6 * 7"]
    proc = subprocess.run(
        [sys.executable, "-c", TRAINING_TOOL, str(MATH_SPEC), json.dumps(expressions)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not marker.exists()
    assert all(o.startswith("Error") or o == _literal(x) for o, x in zip(outputs[:-1], expressions, strict=False))
    runaway = [o for o, x in zip(outputs, expressions, strict=True) if x in ("9**9**9", "factorial(10**8)")]
    # the CPU limit ends the calculation; on a loaded machine the call's own timeout may come first
    assert len(runaway) == 2 and all("exceeded its limits" in o or "timed out" in o for o in runaway), runaway
    assert "MemoryError" in outputs[expressions.index("'a' * 10**10")]
    assert outputs[-1] == "42"


def _calculator_process(before: set[int]) -> psutil.Process:
    me = psutil.Process()
    for child in me.children(recursive=True):
        if child.pid not in before and "mcp_server_calculator" in " ".join(child.cmdline()):
            return child
    raise AssertionError("no calculator process found")


def test_calculator_limits_and_no_network() -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    async def go() -> tuple[str, dict[str, str], list[str], str]:
        async with open_calculator() as tool:
            proc = _calculator_process(before)
            limits = Path(f"/proc/{proc.pid}/limits").read_text()
            net_dev = Path(f"/proc/{proc.pid}/net/dev").read_text().splitlines()[2:]
            interfaces = [line.split(":")[0].strip() for line in net_dev]
            netns = os.readlink(f"/proc/{proc.pid}/ns/net")
            answer = await calculate(tool, "2 ** 10")
            return answer, {"limits": limits}, interfaces, netns

    answer, info, interfaces, netns = asyncio.run(go())
    assert answer == "1024"
    address_space = next(line for line in info["limits"].splitlines() if line.startswith("Max address space"))
    assert address_space.split()[3] == str(MEMORY_LIMIT_BYTES), address_space
    if os.geteuid() == 0 or netns != os.readlink("/proc/self/ns/net"):
        assert netns != os.readlink("/proc/self/ns/net"), "the calculator shares the harness's network namespace"
        assert interfaces == ["lo"], interfaces


# --- no code path from model text to eval/exec/a shell -------------------------------------------------------------

FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_METHODS = {"system", "popen", "getoutput", "getstatusoutput", "spawnl", "spawnv", "execv", "execvp"}


def test_no_eval_exec_or_shell_in_the_harness_and_benchmarks() -> None:
    """No source file of the harness or a benchmark calls eval/exec/compile, os.system/popen, a shell
    (``shell=True``), or an unsafe YAML/pickle loader: nothing there could run model text."""
    offenders = []
    files = sorted([*(REPO / "harness").rglob("*.py"), *(REPO / "benchmarks").rglob("*.py")])
    assert len(files) > 20
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if (isinstance(func, ast.Name) and name in FORBIDDEN_BUILTINS) or name in FORBIDDEN_METHODS:
                offenders.append(f"{where} {name}()")
            if any(k.arg == "shell" and not _false(k.value) for k in node.keywords):
                offenders.append(f"{where} shell=")
            owner = getattr(getattr(func, "value", None), "id", "")
            if name in ("loads", "load") and owner in ("pickle", "marshal", "dill"):
                offenders.append(f"{where} {owner}")
            if name in ("load", "load_all") and getattr(getattr(func, "value", None), "id", "") == "yaml":
                loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                if not (isinstance(loader, ast.Name) and "Safe" in _base_names(tree, loader.id)):
                    offenders.append(f"{where} yaml.load without a safe loader")
    assert offenders == []


def _literal(expression: str) -> object:
    try:
        return ast.literal_eval(expression)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and not node.value


def _base_names(tree: ast.AST, class_name: str) -> str:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return " ".join(ast.unparse(b) for b in node.bases)
    return ""
