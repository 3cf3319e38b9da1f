"""Scripted τ² endpoints: real OpenAI-compatible HTTP servers in threads that play the policy and the user simulator.

The scripts read only what a model would read (each request's messages) and keep no state of their own, so one
server serves concurrent conversations (``harness.rollout.evaluate`` runs several at once):

- the **user** (:func:`user_reply`) finds its task by the scenario in its system prompt, opens with the task's
  request (tagged ``Task <id>:``) and answers ``###STOP###`` to the agent's last message. In a dual-control domain
  (telecom) it also performs the task's expected actions whose ``requestor`` is the user, with its own tools, when
  the agent asks for them (:data:`ASK`): one tool call per reply, then it reports where it got to (:data:`DONE`);
- the **oracle policy** (:func:`oracle_reply`) performs the task's expected actions (τ²'s
  ``evaluation_criteria.actions``) one tool call per reply, in order, asking the user for each run of the user's
  own, then says the information it must communicate (``communicate_info``). Where each side is in the script is
  carried by the ids of its own tool calls (``oracle.<task>.<step>``, ``user.<task>.<step>``) and by the step
  numbers in the two sides' requests and reports: the last message of each request says where to go on.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.benchmark.protocol import Task

STOP = "###STOP###"
OPENING = re.compile(r"^Task (\S+): ")
CALL_ID = re.compile(r"^oracle\.(\S+)\.(\d+)$")
USER_CALL_ID = re.compile(r"^user\.(\S+)\.(\d+)$")
ASK = re.compile(r"^Please do step (\d+) of task (\S+) on your phone")
"""The oracle asking the user for the user's next expected action(s)."""
DONE = re.compile(r"^I did what you asked, up to step (\d+) of task (\S+)\.")
"""The user telling the oracle where the user's actions ended."""
Reply = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
"""A request body to (HTTP status, response body)."""


def completion(content: str | None = None, tool_calls: Sequence[Mapping[str, Any]] = ()) -> tuple[int, dict]:
    """A 200 chat completion with ``content`` and/or ``tool_calls`` (OpenAI's shape)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(c) for c in tool_calls]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    body = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time())}
    return 200, {**body, "model": "scripted", "choices": [choice], "usage": usage}


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One OpenAI tool call; ``arguments`` is sent as written (it need not be JSON)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def tau2_task(task: Task) -> Any:
    from tau2.data_model.tasks import Task as Tau2Task

    return Tau2Task(**task.data)


class ScriptedEndpoint:
    """``POST /v1/chat/completions`` answered by ``reply(body)``, on 127.0.0.1 in a background thread."""

    def __init__(self, reply: Reply) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                owner.requests += 1
                status, payload = owner.reply(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.reply = reply
        self.requests = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def user_reply(tasks: Sequence[Task]) -> Reply:
    """The scripted user of ``tasks``: the task's request first; the user's own expected actions when the agent
    asks for them; ``###STOP###`` to anything else the agent says."""
    by_id = {t.id: t for t in tasks}
    by_scenario = {}
    for t in tasks:
        scenario = tau2_task(t).user_scenario
        by_scenario[str(scenario.instructions).strip()] = t  # the lab's prompt (single control)
        by_scenario[str(scenario).strip()] = t  # τ²'s own, persona included (dual control)

    def reply(body: dict[str, Any]) -> tuple[int, dict]:
        messages = body["messages"]
        last = messages[-1]
        if not any(m["role"] == "assistant" for m in messages):  # no turn of its own yet (roles flipped): open
            system = "\n".join(text_of(m) for m in messages if m["role"] in ("system", "developer"))
            scenario = system.partition("<scenario>")[2].partition("</scenario>")[0].strip()
            task = by_scenario[scenario]
            return completion(f"Task {task.id}: {tau2_task(task).user_scenario.instructions.reason_for_call}")
        if last["role"] == "tool" and (done := USER_CALL_ID.match(str(last.get("tool_call_id", "")))):
            return user_step(by_id[done.group(1)], int(done.group(2)) + 1)
        if last["role"] == "user" and (asked := ASK.match(text_of(last))):
            return user_step(by_id[asked.group(2)], int(asked.group(1)))
        return completion(STOP)

    return reply


def user_step(task: Task, step: int) -> tuple[int, dict]:
    """The user's expected action ``step`` as a tool call if it is the user's, else the user's report."""
    actions = tau2_task(task).evaluation_criteria.actions or []
    if step < len(actions) and actions[step].requestor == "user":
        action = actions[step]
        return completion(tool_calls=[tool_call(f"user.{task.id}.{step}", action.name, json.dumps(action.arguments))])
    return completion(f"I did what you asked, up to step {step} of task {task.id}.")


def final_message(task: Task) -> str:
    """The oracle's last message: the information τ² checks that the agent communicated."""
    info = tau2_task(task).evaluation_criteria.communicate_info or []
    return " ".join(["Your request is complete.", *(f"{i}." for i in info)])


def oracle_reply(tasks: Sequence[Task]) -> Reply:
    """The oracle policy of ``tasks``: each expected action as a tool call, in order (asking the user for the user's
    own), then :func:`final_message`."""
    by_id = {t.id: t for t in tasks}

    def reply(body: dict[str, Any]) -> tuple[int, dict]:
        last = body["messages"][-1]
        if last["role"] == "tool" and (done := CALL_ID.match(str(last.get("tool_call_id", "")))):
            task_id, step = done.group(1), int(done.group(2)) + 1
        elif last["role"] == "user" and (opening := OPENING.match(text_of(last))):
            task_id, step = opening.group(1), 0
        elif last["role"] == "user" and (reported := DONE.match(text_of(last))):
            task_id, step = reported.group(2), int(reported.group(1))
        else:
            return completion(f"the oracle lost its place at {json.dumps(last)[:300]}")
        task = by_id[task_id]
        actions = tau2_task(task).evaluation_criteria.actions or []
        if step < len(actions):
            action = actions[step]
            if action.requestor == "user":
                return completion(f"Please do step {step} of task {task_id} on your phone: {action.name}.")
            call = tool_call(f"oracle.{task_id}.{step}", action.name, json.dumps(action.arguments))
            return completion(tool_calls=[call])
        return completion(final_message(task))

    return reply


def context_limited(reply: Reply, max_bytes: int) -> Reply:
    """``reply`` behind a context limit: a request of more than ``max_bytes`` of JSON is refused with a 400, as a
    vLLM server refuses a prompt longer than its ``max_model_len``."""

    def limited(body: dict[str, Any]) -> tuple[int, dict]:
        size = len(json.dumps(body))
        if size > max_bytes:
            message = f"This model's maximum context length is {max_bytes} bytes. However, you requested {size}."
            return 400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
        return reply(body)

    return limited
