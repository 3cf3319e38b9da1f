"""The Berkeley Function Calling Leaderboard (BFCL v4), single-turn categories, scored by BFCL's own checker.

Each task is one row of a category file of the ``bfcl-eval`` package: a question and the function definitions the
model may call. The model answers once. In ``prompt`` mode it sees BFCL's own system prompt listing the functions
and writes the calls as Python text (``[func(a=1)]``); in ``fc`` mode the functions reach it as tools in the served
model's own tool-call format. The verdict is BFCL's: its eval runner's per-entry functions, with the handler of the
mode, in its own environment (``checker.py``). A prompt-mode reply whose arguments are not literals, or that is
beyond the bounds of ``literal.py``, never reaches the checker: it is a failed sample, and the episode says why
(``info["failure"] == "refused"``). Multi-turn calls run on the task's backends by name (``dispatch.py``), never
through ``eval``. A reply on which the checker fails (an exception, a crash, its time limit) while the checker still
scores known-good input fails its own sample (``info["failure"] == "checker"``), never the run.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.benchmark import (
    DatasetFile,
    Episode,
    Message,
    MessageRecord,
    RolloutContext,
    SingleTurnBenchmark,
    SpecError,
    Task,
    complete,
    fetch_file,
    load_module,
    read_jsonl,
    register_benchmark,
)

_literal = load_module(Path(__file__).with_name("literal.py"), "harness_benchmark_bfcl_literal")
_protocol = load_module(Path(__file__).with_name("protocol.py"), "harness_benchmark_bfcl_protocol")
_checker = load_module(Path(__file__).with_name("checker.py"), "harness_benchmark_bfcl_checker")


class BfclOptions(BaseModel):
    """``agent.options`` of the bfcl spec."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["prompt", "fc"] = Field(
        "prompt", description="prompt: calls written as Python text, BFCL's decoder; fc: the served model's tool calls."
    )
    answers: dict[str, DatasetFile] = Field(
        default_factory=dict, description="Category -> its possible-answer file (path in the package, sha256)."
    )


class BfclVerdict(BaseModel):
    """The benchmark's verdict on one output: BFCL's (``valid``, ``error_type``, ``error``), or why the harness kept
    the output from the checker (``refused``) or the checker failed on it (``checker_failed``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    valid: bool
    error_type: str = ""
    error: Any = None
    refused: str = ""
    checker_failed: str = ""


CALL_SYNTAX = re.compile(r"[A-Za-z_][\w.]*\(\s*[A-Za-z_]\w*\s*=")
"""Something written like a call with a named argument: ``name(arg=``."""


def category_of(task_id: str) -> str:
    """``simple_python_12`` -> ``simple_python`` (BFCL's ids are ``<category>_<index>``)."""
    return task_id.rsplit("_", 1)[0]


@register_benchmark
class Bfcl(SingleTurnBenchmark):
    shaping_terms = ("names_function", "call_syntax", "decodes")

    def __init__(self, spec: Any, folder: Path) -> None:
        super().__init__(spec, folder)
        try:
            self.options = BfclOptions.model_validate(spec.agent.options)
        except ValueError as exc:
            raise SpecError(f"{folder / 'spec.yaml'}: agent.options: {str(exc).splitlines()[-2].strip()}") from None
        self._answers: dict[str, dict[str, Any]] = {}
        self._prepared: dict[str, _protocol.Prepared] = {}
        self._verdicts: dict[tuple[str, str], BfclVerdict] = {}

    # -- tasks ---------------------------------------------------------------------------------------------------
    def _answers_of(self, category: str) -> dict[str, Any]:
        if category not in self._answers:
            pin = self.options.answers.get(category)
            if pin is None:
                if "relevance" in category:  # (ir)relevance: the verdict is whether the reply calls anything
                    self._answers[category] = {}
                    return self._answers[category]
                raise SpecError(f"bfcl: no possible-answer file for category {category!r} in agent.options.answers")
            resolved = fetch_file(self.spec.dataset, f"{category}:answers", pin)
            self._answers[category] = {row["id"]: row["ground_truth"] for row in read_jsonl(resolved.path)}
        return self._answers[category]

    def tasks(self, rows: Sequence[dict[str, Any]]) -> list[Task]:
        tasks = []
        for row in rows:
            task_id = str(row["id"])
            answers = self._answers_of(category_of(task_id))
            if answers and task_id not in answers:
                raise SpecError(f"bfcl: task {task_id} has no possible answer in its category's file")
            question = row["question"][0][-1]["content"] if row.get("question") else ""
            truth = answers.get(task_id)
            tasks.append(Task(id=task_id, prompt=question, answer="" if truth is None else json.dumps(truth), data=row))
        return tasks

    def prepared(self, task: Task) -> _protocol.Prepared:
        """The task through BFCL's loader and handler: ``entry``, ``messages`` and (fc mode) ``tools``."""
        if task.id not in self._prepared:
            self._prepared[task.id] = _checker.shared_checker().prepare(task.data, self.options.mode)
        return self._prepared[task.id]

    # -- scoring -------------------------------------------------------------------------------------------------
    def verdict(self, output: Any, task: Task) -> BfclVerdict:
        """BFCL's verdict on ``output`` (prompt mode: the reply's text; fc mode: ``[{name: arguments}]`` or the
        reply's text when it made no call), with ``refused`` set when the harness kept it from the checker."""
        if self.options.mode == "prompt":
            why = _literal.refusal(output)
            if why is not None:
                return BfclVerdict(valid=False, error_type="harness:refused", error=why, refused=why)
        answer = json.loads(task.answer) if task.answer else None
        try:
            checked = _checker.shared_checker().check(self.prepared(task).entry, answer, self.options.mode, output)
        except _checker.ReplyFault as exc:
            return BfclVerdict(
                valid=False, error_type="harness:checker_failed", error=str(exc), checker_failed=str(exc)
            )
        return BfclVerdict(valid=checked.valid, error_type=checked.error_type, error=checked.error)

    def _text_verdict(self, text: str, task: Task) -> BfclVerdict:
        """:meth:`verdict` of a reply's text, remembered (a trainer asks for the score and each shaping term)."""
        key = (task.id, text)
        if key not in self._verdicts:
            if len(self._verdicts) > 10_000:
                self._verdicts.clear()
            self._verdicts[key] = self.verdict(text, task)
        return self._verdicts[key]

    def score(self, text: str, task: Task) -> float:
        return float(self._text_verdict(text, task).valid)

    def shaping(self, episode: Episode, task: Task) -> dict[str, float]:
        """``names_function``: the reply names a function it was offered; ``call_syntax``: it contains something
        written like a call with a named argument (``f(x=...``), anywhere; ``decodes``: BFCL's decoder reads the
        whole reply as function calls (whatever their names and values). Dense signals for a model that starts out
        writing prose; pass rates never use them."""
        text = episode.final_text
        names = [f["name"] for f in task.data.get("function", [])]
        named = any(n in text or n.replace(".", "_") in text for n in names)
        error_type = self._text_verdict(text, task).error_type
        calls_wanted = bool(names) and "relevance" not in category_of(task.id)
        decodes = calls_wanted and not error_type.startswith(("ast_decoder", "harness:refused"))
        syntax = CALL_SYNTAX.search(text) is not None
        return {"names_function": float(named), "call_syntax": float(syntax), "decodes": float(decodes)}

    def training_prompt(self, task: Task) -> list[dict[str, str]]:
        return [{"role": m["role"], "content": m["content"]} for m in self.prepared(task).messages]

    async def rollout(self, task: Task, ctx: RolloutContext) -> Episode:
        if category_of(task.id).startswith("multi_turn"):
            return await self._multi_turn(task, ctx)
        prepared = await asyncio.to_thread(self.prepared, task)
        prompt = [Message(role=m["role"], content=m["content"]) for m in self.training_prompt(task)]
        extra: dict[str, Any] = {"tools": prepared.tools} if self.options.mode == "fc" and prepared.tools else {}
        reply = await complete(ctx, prompt, **extra)
        calls = reply.message.tool_calls or []
        output: Any = reply.text
        if self.options.mode == "fc" and calls:
            output = [{c["function"]["name"]: c["function"]["arguments"]} for c in calls]
        verdict = await asyncio.to_thread(self.verdict, output, task)
        reward = float(verdict.valid)
        info = {"category": category_of(task.id), "error_type": verdict.error_type}
        if verdict.refused:
            info.update(refused=verdict.refused, failure="refused")
        if verdict.checker_failed:
            info.update(checker_failed=verdict.checker_failed, failure="checker")
        return Episode(
            task_id=task.id,
            reward=reward,
            passed=self.passed(reward),
            answer=json.dumps(output) if not isinstance(output, str) else output,
            messages=[*(m.record() for m in prompt), reply.message.record()],
            turns=1,
            tool_calls=len(calls),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
            info=info,
        )

    # -- multi-turn ----------------------------------------------------------------------------------------------
    async def _multi_turn(self, task: Task, ctx: RolloutContext) -> Episode:
        """BFCL's multi-turn conversation in prompt mode: for each of the task's user turns, the model replies step
        by step; each reply that decodes to calls is run on the task's backends (a file system, a trading bot, ...)
        and the results go back to it, until a reply that is not a call ends the turn (BFCL's step limit ends the
        conversation). Its own child process holds this rollout's backends, so no two samples share state. The
        verdict is BFCL's multi-turn checker: the backends' state and results against the ground truth's."""
        if self.options.mode != "prompt":
            raise SpecError("bfcl: multi-turn categories run in prompt mode (agent.options.mode: prompt)")
        prepared = await asyncio.to_thread(self.prepared, task)
        entry = prepared.entry
        session = _checker.Checker()
        started = time.perf_counter()
        messages = [Message(role=m["role"], content=m["content"]) for m in prepared.messages]
        record: list[MessageRecord] = [m.record() for m in messages]
        replies: list[list[str]] = []
        prompt_tokens = completion_tokens = calls = 0
        info: dict[str, Any] = {"category": category_of(task.id)}
        try:
            max_steps = (await asyncio.to_thread(session.max_steps)).max_steps
            for turn_index, turn in enumerate(entry["question"]):
                if turn_index > 0:
                    asked = [Message(role=m["role"], content=m["content"]) for m in turn]
                    messages += asked
                    record += [m.record() for m in asked]
                turn_replies: list[str] = []
                replies.append(turn_replies)
                for step in range(max_steps + 1):
                    if step == max_steps:  # BFCL forces the model to quit: the conversation fails
                        replies.pop()
                        info["force_quit"] = turn_index
                        break
                    reply = await complete(ctx, messages)
                    prompt_tokens += reply.prompt_tokens
                    completion_tokens += reply.completion_tokens
                    text = reply.text
                    messages.append(reply.message)
                    record.append(reply.message.record())
                    turn_replies.append(text)
                    why = _literal.refusal(text)
                    ran = None if why else await asyncio.to_thread(session.step, entry, text)
                    if isinstance(ran, _protocol.Refused):
                        why = ran.refused
                    if why:
                        info.update(refused=why, error_type="harness:refused", failure="refused")
                        return self._multi_turn_episode(
                            task, 0.0, record, calls, prompt_tokens, completion_tokens, started, info
                        )
                    assert isinstance(ran, _protocol.Stepped)
                    if not ran.decoded:
                        break
                    assert ran.message is not None
                    calls += len(ran.decoded)
                    results = Message(role=ran.message["role"], content=ran.message["content"])
                    messages.append(results)
                    record.append(results.record(tool_results=ran.results))
                if "force_quit" in info:
                    break
            answer = json.loads(task.answer)
            verdict = await asyncio.to_thread(session.check_multi_turn, entry, answer, replies)
        except _checker.ReplyFault as exc:  # the checker failed on this conversation's replies, and only on them
            info.update(checker_failed=str(exc), error_type="harness:checker_failed", failure="checker")
            return self._multi_turn_episode(task, 0.0, record, calls, prompt_tokens, completion_tokens, started, info)
        finally:
            await asyncio.to_thread(session.close)
        info["error_type"] = verdict.error_type
        reward = float(verdict.valid)
        return self._multi_turn_episode(task, reward, record, calls, prompt_tokens, completion_tokens, started, info)

    def _multi_turn_episode(
        self,
        task: Task,
        reward: float,
        record: list[MessageRecord],
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        started: float,
        info: dict[str, Any],
    ) -> Episode:
        return Episode(
            task_id=task.id,
            reward=reward,
            passed=self.passed(reward),
            messages=record,
            turns=sum(1 for m in record if m.role == "assistant"),
            tool_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=time.perf_counter() - started,
            info=info,
        )
