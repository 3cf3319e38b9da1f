"""The math benchmark's calculator as a tool in verl's own interface (``@function_tool``), for ``verl_speed.py``.

verl's tool agent loop loads this file (``actor_rollout_ref.rollout.multi_turn.function_tool_path``) in each agent-loop
worker. The tool has the MCP calculator's name, description and argument, and answers with the same package's
``evaluate`` run in the calculator's own environment (``HARNESS_ENV_CALCULATOR``, which has ``mcp<2``): one helper
process per worker, each calculation in a forked child under a 2 s CPU limit, as the harness's server does. What the
harness pays on top, and this tool does not, is the MCP protocol (JSON-RPC over stdio through Agent Framework).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from verl.tools.function_tool import function_tool

SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculate",
        "description": "Calculates/evaluates the given expression.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}

# One request per line (a JSON string), one answer per line: {"ok": result} or {"error": message}.
HELPER = r"""
import json, os, resource, sys
from mcp_server_calculator.calculator import evaluate
for line in sys.stdin:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (2, 3))
            out = {"ok": evaluate(json.loads(line))}
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode()[:65536])
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    print(data.decode() or json.dumps({"error": "the calculation exceeded its limits (2 s CPU)"}), flush=True)
"""

_lock = threading.Lock()
_helper: subprocess.Popen[str] | None = None


def _evaluate(expression: str) -> str:
    global _helper
    with _lock:
        if _helper is None or _helper.poll() is not None:
            python = Path(os.environ["HARNESS_ENV_CALCULATOR"]) / "bin" / "python"
            _helper = subprocess.Popen(
                [str(python), "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
            )
        assert _helper.stdin is not None and _helper.stdout is not None
        _helper.stdin.write(json.dumps(expression) + "\n")
        _helper.stdin.flush()
        answer = json.loads(_helper.stdout.readline())
    if "error" in answer:
        return f"Error executing tool calculate: {answer['error']}"
    return str(answer["ok"])


@function_tool("calculate", schema=SCHEMA)
def calculate(expression: str) -> str:
    return _evaluate(expression)
