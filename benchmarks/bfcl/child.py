"""BFCL's own code, run in its environment (``.venvs/bfcl``) as a child of the harness: one JSON request per line on
stdin, one JSON reply per line on stdout.

Requests:

- ``{"op": "prepare", "entry": <dataset row>, "mode": "prompt"|"fc"}`` -> ``{"entry": <row as BFCL's loader leaves
  it>, "messages": [...], "tools": [...]}``: the row through BFCL's own loading steps (predefined functions, the
  language hint in each function description), the messages its OpenAI-compatible handler sends (prompt mode: its
  system prompt listing the functions) and, in ``fc`` mode, the tools as its handler converts them.
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
import json
import os
import sys
import traceback

# The handlers build API clients at construction; nothing here calls a provider.
os.environ.setdefault("OPENAI_API_KEY", "unused")

from bfcl_eval.constants.enums import Language, ReturnFormat
from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
from bfcl_eval.eval_checker import eval_runner
from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
from bfcl_eval.model_handler.utils import convert_to_tool, system_prompt_pre_processing_chat_model
from bfcl_eval.utils import (
    add_language_specific_hint_to_function_doc,
    extract_test_category_from_id,
    populate_test_cases_with_predefined_functions,
)

# The leaderboard's OpenAI entries: the same model in prompt mode and in function-calling mode. Their registry
# entries decide how a reply is decoded and whether dots in function names were sent as underscores.
REGISTRY = {"prompt": "gpt-4o-2024-11-20", "fc": "gpt-4o-2024-11-20-FC"}
STYLE = OpenAICompletionsHandler(
    model_name="x", temperature=0, registry_name=REGISTRY["fc"], is_fc_model=True
).model_style


def handler(mode: str):
    return eval_runner.get_handler(REGISTRY[mode])


HANDLERS = {mode: handler(mode) for mode in REGISTRY}


def prepare(entry: dict, mode: str) -> dict:
    (entry,) = populate_test_cases_with_predefined_functions([copy.deepcopy(entry)])
    (entry,) = add_language_specific_hint_to_function_doc([entry])
    messages = copy.deepcopy(entry["question"][0])
    tools: list = []
    if mode == "prompt":
        messages = system_prompt_pre_processing_chat_model(messages, entry["function"], entry["id"])
    else:
        tools = convert_to_tool(entry["function"], GORILLA_TO_OPENAPI, STYLE)
    return {"entry": entry, "messages": messages, "tools": tools}


def check(entry: dict, answer: list | None, mode: str, output: object) -> dict:
    category = extract_test_category_from_id(entry["id"])
    model_name = REGISTRY[mode]
    handler = HANDLERS[mode]
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


def main() -> None:
    assert REGISTRY["fc"] in MODEL_CONFIG_MAPPING and REGISTRY["prompt"] in MODEL_CONFIG_MAPPING
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
            else:
                reply = {"failure": f"unknown op {req['op']!r}"}
        except Exception as exc:
            reply = {"failure": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)}
        print(json.dumps(reply, default=repr), flush=True)


if __name__ == "__main__":
    main()
