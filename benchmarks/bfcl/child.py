"""BFCL's own code, run in its environment (``.venvs/bfcl``) as a child of the harness: it answers the requests of
``protocol.py``, one record a line on stdin, its reply a line on stdout. A request that is not a record of this
protocol version gets a :class:`protocol.Failure` saying why in one line, and the child serves the next one.

It prepares a row as BFCL's loader and handler do (:func:`prepare`), scores a single-turn output with the functions
BFCL's eval runner calls per entry (:func:`check`), runs a multi-turn conversation's steps on its backends
(:func:`step`) and scores the conversation with BFCL's multi-turn checker (:func:`check_multi_turn`). The harness
asks it to score known-good input (:func:`probe`) after any failure, to tell a reply that broke the checker from a
broken checker.

Model text never reaches ``eval``: a prompt-mode output goes to BFCL's decoder only after ``literal.py`` has found it
made of plain calls with literal arguments within bounds (the decoder calls ``eval`` on other argument expressions),
and multi-turn calls run through ``dispatch.py`` (by name, on the task's backends), never through BFCL's executor.
Before BFCL is imported, the process makes its file system read-only but its scratch folder where it has a mount
namespace of its own (``confine.py``); it has no network where the system allows (``benchmarks/bfcl/checker.py``).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
MOUNT_NS_ENV = "HARNESS_BFCL_PARENT_MOUNT_NS"
"""The mount namespace of the process that started this one: the child confines itself only in another."""


def _load(name: str) -> ModuleType:
    """A module of this folder by its file (the child runs isolated, ``-I``: this folder is not on its path)."""
    spec = importlib.util.spec_from_file_location(f"bfcl_child_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


literal = _load("literal")
dispatch = _load("dispatch")
protocol = _load("protocol")
CONFINEMENT = (
    _load("confine").confine(Path.cwd(), os.environ.get(MOUNT_NS_ENV, ""))
    if __name__ == "__main__"
    else "not confined: imported, not run"
)

# The handlers build API clients at construction; nothing here calls a provider.
os.environ.setdefault("OPENAI_API_KEY", "unused")
# BFCL makes its result folders at import, beside the package unless told otherwise: in the scratch folder here.
os.environ.setdefault("BFCL_PROJECT_ROOT", str(Path.cwd()))

from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker  # noqa: E402
from bfcl_eval.model_handler.utils import (  # noqa: E402
    decoded_output_to_execution_list,
    format_execution_results_prompting,
    system_prompt_pre_processing_chat_model,
)
from bfcl_eval.utils import (  # noqa: E402
    add_language_specific_hint_to_function_doc,
    extract_test_category_from_id,
    populate_test_cases_with_predefined_functions,
)

# The leaderboard's OpenAI entries: the same model in prompt mode and in function-calling mode. Their registry
# entries decide how a reply is decoded and whether dots in function names were sent as underscores.
REGISTRY = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}
# A multi-turn rollout's backends, by task: one process per rollout (the harness starts a fresh child for each), so
# no two samples share an instance.
SESSIONS: dict[str, Any] = {}


@functools.cache
def ast_runner() -> tuple[Any, dict[str, Any], Any]:
    """BFCL's eval runner, its handlers by mode and its OpenAI tool style (imported on first use: the model
    registry imports every provider SDK, seconds that a multi-turn session does not need)."""
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    style = OpenAICompletionsHandler(model_name="x", temperature=0, registry_name=REGISTRY["fc"], is_fc_model=True)
    handlers = {mode: eval_runner.get_handler(name) for mode, name in REGISTRY.items()}
    return eval_runner, handlers, style.model_style


def prepare(entry: dict, mode: str) -> protocol.Prepared:
    """The row through BFCL's own loading steps (predefined functions, the language hint in each function
    description), the messages its OpenAI-compatible handler sends (prompt mode: its system prompt listing the
    functions) and, in ``fc`` mode, the tools as its handler converts them."""
    (entry,) = populate_test_cases_with_predefined_functions([copy.deepcopy(entry)])
    (entry,) = add_language_specific_hint_to_function_doc([entry])
    messages = copy.deepcopy(entry["question"][0])
    tools: list = []
    if mode == "prompt":
        messages = system_prompt_pre_processing_chat_model(messages, entry["function"], entry["id"])
    else:
        from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
        from bfcl_eval.model_handler.utils import convert_to_tool

        tools = convert_to_tool(entry["function"], GORILLA_TO_OPENAPI, ast_runner()[2])
    return protocol.Prepared(entry=entry, messages=messages, tools=tools)


def check(entry: dict, answer: list | None, mode: str, output: object) -> protocol.Verdict:
    """The verdict of BFCL's eval runner for one entry, from the functions it calls per entry
    (``_evaluate_single_ast_entry``, ``_evaluate_single_relevance_entry``) with the handler of the mode."""
    from bfcl_eval.constants.enums import Language, ReturnFormat

    if isinstance(output, str) and (why := literal.refusal(output)) is not None:  # the harness checks first too
        return protocol.Verdict(valid=False, error_type="harness:refused", error=why)

    eval_runner, handlers, _style = ast_runner()
    category = extract_test_category_from_id(entry["id"])
    model_name = REGISTRY[mode]
    handler = handlers[mode]
    if "irrelevance" in category or "relevance" in category:
        result = eval_runner._evaluate_single_relevance_entry(handler, entry["id"], output, entry, model_name, category)
    else:
        result = eval_runner._evaluate_single_ast_entry(
            handler,
            entry["id"],
            output,
            answer,
            entry,
            model_name,
            category,
            language=Language.PYTHON,
            return_format=ReturnFormat.PYTHON,
            has_tool_call_tag=False,
        )
    return protocol.Verdict(
        valid=bool(result["valid"]), error_type=result.get("error_type", ""), error=result.get("error")
    )


def decode(reply: str) -> tuple[list, list[str]] | None:
    """A reply's calls and BFCL's text of each (what the model reads back beside each result), or None where BFCL's
    decoder reads no call (prose, ``[]``, a set, an empty dictionary argument); :class:`literal.Refused` beyond
    the bounds or for a non-literal argument."""
    try:
        found = literal.calls(reply)
    except literal.NotDecoded:
        return None
    if not found:
        return None
    try:  # BFCL's own writing of the calls (text only: nothing is evaluated); it fails where its decoder fails
        texts = decoded_output_to_execution_list([{c.name: c.arguments} for c in found])
    except Exception:
        return None
    return found, texts


def step(entry: dict, output: str) -> protocol.Stepped | protocol.Refused:
    """One model step of a multi-turn turn, as BFCL's prompting inference does it: decode the reply into calls
    (a reply that does not decode, or decodes to nothing, ends the turn) and run them on this session's backends
    by name; the message that carries the results back, in BFCL's format."""
    try:
        decoded = decode(output)
    except literal.Refused as exc:
        return protocol.Refused(refused=str(exc))
    if decoded is None:
        return protocol.Stepped(decoded=None)
    found, texts = decoded
    if entry["id"] not in SESSIONS:
        SESSIONS[entry["id"]] = dispatch.Backends(entry)
    results = SESSIONS[entry["id"]].run(found)
    message = format_execution_results_prompting({}, results, {"model_responses_decoded": texts})
    return protocol.Stepped(decoded=texts, results=results, message={"role": "user", "content": message})


def multi_turn_verdict(entry: dict, answer: list, model_turns: list[list[list]]) -> dict:
    """BFCL's ``multi_turn_checker``, its calls run by :mod:`dispatch`: per turn, the model's decoded steps on one
    set of fresh backends and the ground truth's calls on another; a turn with ground truth needs some model step,
    the backends' states must match (BFCL's ``state_checker``) and the ground truth's results must be among the
    model's results so far (its ``response_checker``)."""
    model, truth = dispatch.Backends(entry), dispatch.Backends(entry)
    all_model_results: list[str] = []
    for turn_index, truth_calls in enumerate(answer):
        steps = model_turns[turn_index]
        for calls in steps:
            all_model_results.extend(model.run(calls))
        truth_results = truth.run([c for text in truth_calls for c in literal.calls(text, positional=True)], True)
        if truth_calls and not steps:
            return {
                "valid": False,
                "error_message": f"Model response list is empty for turn {turn_index}",
                "error_type": "multi_turn:empty_turn_model_response",
            }
        if not truth_calls:
            continue
        for result in (
            state_checker(model.instances, truth.instances),
            response_checker(all_model_results, truth_results, turn_index),
        ):
            if not result["valid"]:
                return result
    return {"valid": True}


def check_multi_turn(entry: dict, answer: list, output: list) -> protocol.Verdict:
    """BFCL's multi-turn verdict, as its eval runner reaches it (``_evaluate_single_multi_turn_entry``): a model
    stopped before the last turn fails; each step's reply is decoded (replies that do not decode are skipped);
    :func:`multi_turn_verdict` runs the decoded calls and the ground truth on fresh backends and compares state
    and results turn by turn."""
    if len(output) != len(answer):
        return protocol.Verdict(
            valid=False, error_type="multi_turn:force_terminated", error="fewer turns than the task"
        )
    decoded_turns = []
    for turn in output:
        decoded_steps = []
        for reply in turn:
            try:
                decoded = decode(reply)
            except literal.Refused as exc:
                return protocol.Verdict(valid=False, error_type="harness:refused", error=str(exc))
            if decoded is not None:
                decoded_steps.append(decoded[0])
        decoded_turns.append(decoded_steps)
    result = multi_turn_verdict(entry, answer, decoded_turns)
    return protocol.Verdict(
        valid=bool(result["valid"]), error_type=result.get("error_type", ""), error=result.get("error_message")
    )


PROBE_ENTRY = {
    "id": "simple_python_0",
    "question": [[{"role": "user", "content": "Find the area of a triangle with a base of 10 units and height of 5."}]],
    "function": [
        {
            "name": "calculate_triangle_area",
            "description": "Calculate the area of a triangle given its base and height.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "base": {"type": "integer", "description": "The base of the triangle."},
                    "height": {"type": "integer", "description": "The height of the triangle."},
                },
                "required": ["base", "height"],
            },
        }
    ],
}


def probe() -> protocol.ProbeResult | protocol.Failure:
    """Known-good input scored as BFCL scores it: a right single-turn reply is valid, a wrong one is not, and a
    multi-turn call runs on a fresh backend."""
    entry = prepare(PROBE_ENTRY, "prompt").entry
    truth = [{"calculate_triangle_area": {"base": [10], "height": [5]}}]
    right = check(entry, truth, "prompt", "[calculate_triangle_area(base=10, height=5)]").valid
    wrong = check(entry, truth, "prompt", "[calculate_triangle_area(base=11, height=5)]").valid
    added = dispatch.Backends({"id": "multi_turn_base_0", "involved_classes": ["MathAPI"]}).run(
        literal.calls("[add(a=1, b=2)]")
    )
    ok = right is True and wrong is False and added == ['{"result": 3}']
    return (
        protocol.ProbeResult(ok=True)
        if ok
        else protocol.Failure(failure=f"probe: right {right}, wrong {wrong}, add {added}")
    )


def reply_to(text: str) -> protocol.Reply:
    """The reply to one request line: its op's record, or a :class:`protocol.Failure` for a line that is not a
    request of this version or a request that failed."""
    try:
        req = protocol.read_request(text)
    except protocol.ProtocolError as exc:
        return protocol.Failure(failure=str(exc))
    try:
        if isinstance(req, protocol.Prepare):
            return prepare(req.entry, req.mode)
        if isinstance(req, protocol.Check):
            return check(req.entry, req.answer, req.mode, req.output)
        if isinstance(req, protocol.Step):
            return step(req.entry, req.output)
        if isinstance(req, protocol.CheckMultiTurn):
            return check_multi_turn(req.entry, req.answer, req.output)
        if isinstance(req, protocol.Probe):
            return probe()
        return protocol.MaxSteps(max_steps=MAXIMUM_STEP_LIMIT)
    except Exception as exc:
        return protocol.Failure(failure=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(limit=4))


def main() -> None:
    print(protocol.line(protocol.Ready(confinement=CONFINEMENT)), flush=True)
    for text in sys.stdin:
        if text.strip():
            print(protocol.line(reply_to(text)), flush=True)


if __name__ == "__main__":
    main()
