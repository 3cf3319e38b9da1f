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
  when a call names a Python builtin rather than a function of the task.
- ``{"op": "check_multi_turn", "entry": ..., "answer": <ground truth turns>, "output": <replies per turn>}`` ->
  the verdict of BFCL's multi-turn checker (state and results of the backends against the ground truth's).
- ``{"op": "check", "entry": <prepared row>, "answer": <ground truth or null>, "mode": ..., "output": ...}`` ->
  ``{"valid": bool, "error_type": str, "error": ...}``: the verdict of BFCL's eval runner for one entry, from the
  functions it calls per entry (``_evaluate_single_ast_entry``, ``_evaluate_single_relevance_entry``) with the
  handler of the mode. ``output`` is the model's text (prompt mode) or its tool calls as ``[{name: arguments}]``
  (fc mode), as BFCL's handlers record them.

The harness sends a prompt-mode output here only after checking that it is made of plain calls with literal
arguments: BFCL's decoder calls ``eval`` on some argument expressions. This process has no network where the system
allows (see ``benchmarks/bfcl/checker.py``).
"""

from __future__ import annotations

import copy
import functools
import json
import os
import sys
import traceback
from typing import Any

# The handlers build API clients at construction; nothing here calls a provider.
os.environ.setdefault("OPENAI_API_KEY", "unused")

from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import (
    execute_multi_turn_func_call,
    is_empty_execute_response,
)
from bfcl_eval.model_handler.utils import (
    default_decode_execute_prompting,
    format_execution_results_prompting,
    system_prompt_pre_processing_chat_model,
)
from bfcl_eval.utils import (
    add_language_specific_hint_to_function_doc,
    extract_test_category_from_id,
    populate_test_cases_with_predefined_functions,
)

# The leaderboard's OpenAI entries: the same model in prompt mode and in function-calling mode. Their registry
# entries decide how a reply is decoded and whether dots in function names were sent as underscores.
REGISTRY = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}
# Multi-turn backends are kept in module globals named after the model and the task: one process per rollout
# (the harness starts a fresh child for each), so no two samples share an instance.
SESSION_MODEL = "harness"


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


def backend_methods(entry: dict) -> set[str]:
    """The public method names of the task's backends (what BFCL maps calls onto)."""
    _, instances = execute_multi_turn_func_call(
        [], entry.get("initial_config", {}), entry["involved_classes"], SESSION_MODEL, entry["id"]
    )
    return {name for inst in instances.values() for name in dir(inst) if not name.startswith("_")}


def unsafe_names(calls: list[str], entry: dict) -> list[str]:
    """Called names that are neither a backend method nor undefined: Python builtins (``open``, ``__import__``,
    ...), which BFCL's ``eval`` would run."""
    import builtins

    names = [c.split("(", 1)[0].rsplit(".", 1)[-1] for c in calls]
    methods = backend_methods(entry)
    return [n for n in names if n not in methods and hasattr(builtins, n)]


def step(entry: dict, output: str) -> dict:
    """One model step of a multi-turn turn, as BFCL's prompting inference does it: decode the reply into calls
    (a reply that does not decode, or decodes to nothing, ends the turn) and run them on this session's backends;
    the message that carries the results back, in BFCL's format."""
    try:
        decoded = default_decode_execute_prompting(output, has_tool_call_tag=False)
        if is_empty_execute_response(decoded):
            return {"decoded": None}
    except Exception:
        return {"decoded": None}
    bad = unsafe_names(decoded, entry)
    if bad:
        return {"refused": f"calls {', '.join(sorted(set(bad)))}, which is not a function of the task"}
    results, _ = execute_multi_turn_func_call(
        decoded, entry.get("initial_config", {}), entry["involved_classes"], SESSION_MODEL, entry["id"]
    )
    message = format_execution_results_prompting({}, results, {"model_responses_decoded": decoded})
    return {"decoded": decoded, "results": results, "message": {"role": "user", "content": message}}


def check_multi_turn(entry: dict, answer: list, output: list) -> dict:
    """BFCL's multi-turn verdict, as its eval runner reaches it (``_evaluate_single_multi_turn_entry``): a model
    stopped before the last turn fails; each step's reply is decoded (replies that do not decode are skipped);
    ``multi_turn_checker`` runs the decoded calls and the ground truth on fresh backends and compares state and
    results turn by turn."""
    category = extract_test_category_from_id(entry["id"])
    if len(output) != len(answer):
        return {"valid": False, "error_type": "multi_turn:force_terminated", "error": "fewer turns than the task"}
    decoded_turns = []
    for turn in output:
        decoded_steps = []
        for reply in turn:
            try:
                decoded = default_decode_execute_prompting(reply, has_tool_call_tag=False)
            except Exception:  # noqa: S112 - as BFCL's runner: undecodable replies are skipped
                continue
            if is_empty_execute_response(decoded):
                continue
            if unsafe_names(decoded, entry):
                return {"valid": False, "error_type": "harness:refused", "error": "calls a Python builtin"}
            decoded_steps.append(decoded)
        decoded_turns.append(decoded_steps)
    entry = {k: v for k, v in entry.items() if k != "function"}
    result = multi_turn_checker(decoded_turns, answer, entry, category, SESSION_MODEL)
    return {
        "valid": bool(result["valid"]),
        "error_type": result.get("error_type", ""),
        "error": result.get("error_message"),
    }


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
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
            elif req["op"] == "max_steps":
                reply = {"max_steps": MAXIMUM_STEP_LIMIT}
            else:
                reply = {"failure": f"unknown op {req['op']!r}"}
        except Exception as exc:
            reply = {"failure": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)}
        print(json.dumps(reply, default=repr), flush=True)


if __name__ == "__main__":
    main()
