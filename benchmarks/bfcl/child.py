"""BFCL's own code, run in its environment (``.venvs/bfcl``) as a child of the harness: one JSON request per line on
stdin, one JSON reply per line on stdout.

Requests:

- ``{"op": "prepare", "entry": <dataset row>, "mode": "prompt"|"fc"}`` -> ``{"entry": <row as BFCL's loader leaves
  it>, "messages": [...], "tools": [...]}``: the row through BFCL's own loading steps (predefined functions, the
  language hint in each function description), the messages its OpenAI-compatible handler sends (prompt mode: its
  system prompt listing the functions) and, in ``fc`` mode, the tools as its handler converts them.
- ``{"op": "step", "entry": <prepared multi-turn row>, "output": <reply>}`` -> ``{"decoded": [...] | null,
  "results": [...], "message": {...}}``: one step of a multi-turn conversation, as BFCL's prompting inference runs
  it (decode; run the calls on this process's backends; the results message in BFCL's format); ``{"refused": why}``
  when the reply is beyond the bounds of ``literal.py`` or has an argument that is not a literal.
- ``{"op": "check_multi_turn", "entry": ..., "answer": <ground truth turns>, "output": <replies per turn>}`` ->
  the verdict of BFCL's multi-turn checker (state and results of the backends against the ground truth's).
- ``{"op": "check", "entry": <prepared row>, "answer": <ground truth or null>, "mode": ..., "output": ...}`` ->
  ``{"valid": bool, "error_type": str, "error": ...}``: the verdict of BFCL's eval runner for one entry, from the
  functions it calls per entry (``_evaluate_single_ast_entry``, ``_evaluate_single_relevance_entry``) with the
  handler of the mode. ``output`` is the model's text (prompt mode) or its tool calls as ``[{name: arguments}]``
  (fc mode), as BFCL's handlers record them.
- ``{"op": "probe"}`` -> ``{"ok": true}`` when a known-good reply scores as BFCL scores it (single-turn and
  multi-turn): the harness asks after any failure, to tell a reply that broke the checker from a broken checker.

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
import json
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


def prepare(entry: dict, mode: str) -> dict:
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
    return {"entry": entry, "messages": messages, "tools": tools}


def check(entry: dict, answer: list | None, mode: str, output: object) -> dict:
    from bfcl_eval.constants.enums import Language, ReturnFormat

    if isinstance(output, str) and (why := literal.refusal(output)) is not None:  # the harness checks first too
        return {"valid": False, "error_type": "harness:refused", "error": why}

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
    return {"valid": bool(result["valid"]), "error_type": result.get("error_type", ""), "error": result.get("error")}


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


def step(entry: dict, output: str) -> dict:
    """One model step of a multi-turn turn, as BFCL's prompting inference does it: decode the reply into calls
    (a reply that does not decode, or decodes to nothing, ends the turn) and run them on this session's backends
    by name; the message that carries the results back, in BFCL's format."""
    try:
        decoded = decode(output)
    except literal.Refused as exc:
        return {"refused": str(exc)}
    if decoded is None:
        return {"decoded": None}
    found, texts = decoded
    if entry["id"] not in SESSIONS:
        SESSIONS[entry["id"]] = dispatch.Backends(entry)
    results = SESSIONS[entry["id"]].run(found)
    message = format_execution_results_prompting({}, results, {"model_responses_decoded": texts})
    return {"decoded": texts, "results": results, "message": {"role": "user", "content": message}}


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


def check_multi_turn(entry: dict, answer: list, output: list) -> dict:
    """BFCL's multi-turn verdict, as its eval runner reaches it (``_evaluate_single_multi_turn_entry``): a model
    stopped before the last turn fails; each step's reply is decoded (replies that do not decode are skipped);
    :func:`multi_turn_verdict` runs the decoded calls and the ground truth on fresh backends and compares state
    and results turn by turn."""
    if len(output) != len(answer):
        return {"valid": False, "error_type": "multi_turn:force_terminated", "error": "fewer turns than the task"}
    decoded_turns = []
    for turn in output:
        decoded_steps = []
        for reply in turn:
            try:
                decoded = decode(reply)
            except literal.Refused as exc:
                return {"valid": False, "error_type": "harness:refused", "error": str(exc)}
            if decoded is not None:
                decoded_steps.append(decoded[0])
        decoded_turns.append(decoded_steps)
    result = multi_turn_verdict(entry, answer, decoded_turns)
    return {
        "valid": bool(result["valid"]),
        "error_type": result.get("error_type", ""),
        "error": result.get("error_message"),
    }


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


def probe() -> dict:
    """Known-good input scored as BFCL scores it: a right single-turn reply is valid, a wrong one is not, and a
    multi-turn call runs on a fresh backend."""
    entry = prepare(PROBE_ENTRY, "prompt")["entry"]
    truth = [{"calculate_triangle_area": {"base": [10], "height": [5]}}]
    right = check(entry, truth, "prompt", "[calculate_triangle_area(base=10, height=5)]")["valid"]
    wrong = check(entry, truth, "prompt", "[calculate_triangle_area(base=11, height=5)]")["valid"]
    added = dispatch.Backends({"id": "multi_turn_base_0", "involved_classes": ["MathAPI"]}).run(
        literal.calls("[add(a=1, b=2)]")
    )
    ok = right is True and wrong is False and added == ['{"result": 3}']
    return {"ok": ok} if ok else {"failure": f"probe: right {right}, wrong {wrong}, add {added}"}


def main() -> None:
    print(json.dumps({"ready": True, "confinement": CONFINEMENT}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if req["op"] == "prepare":
                reply = prepare(req["entry"], req["mode"])
            elif req["op"] == "check":
                reply = check(req["entry"], req.get("answer"), req["mode"], req["output"])
            elif req["op"] == "step":
                reply = step(req["entry"], req["output"])
            elif req["op"] == "check_multi_turn":
                reply = check_multi_turn(req["entry"], req["answer"], req["output"])
            elif req["op"] == "probe":
                reply = probe()
            elif req["op"] == "max_steps":
                reply = {"max_steps": MAXIMUM_STEP_LIMIT}
            else:
                reply = {"failure": f"unknown op {req['op']!r}"}
        except Exception as exc:
            reply = {"failure": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)}
        print(json.dumps(reply, default=repr), flush=True)


if __name__ == "__main__":
    main()
