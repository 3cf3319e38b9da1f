"""A multi-turn task's backends, called by name: BFCL's executor without its ``eval``.

BFCL runs a model's multi-turn calls by writing each decoded call into a string, prefixing method names with the
name of a global holding the backend instance, and ``eval``-ing the string in a module that can reach ``os``. The
string is built from model text (dictionary keys pasted unescaped, dotted names checked only at their last part),
so a reply can run code there. Here a call is (name, keyword values) from :func:`literal.calls`; the name is looked
up among the public methods of the task's backend instances (exact match, a plain ASCII identifier) and the method
is called with the values. Nothing the model wrote is evaluated.

Everything else is BFCL's: the backend classes, their initial scenario (``_load_scenario`` with the task's
``initial_config``, ``long_context`` for the long-context and composite categories), the deny-list of its executor,
and how a result or an exception becomes the text the model reads back. Where BFCL would evaluate something that
is not a literal value (a call nested in an argument, which BFCL spells as a dictionary whose values are all
dictionaries; a non-finite float, which BFCL writes as ``inf`` and cannot read back), the call gets an error text
instead of being run. tests/test_bfcl.py runs every multi-turn task's ground truth through both this and BFCL's
executor and requires the same results and backend states.

Runs in BFCL's environment (the checker child).
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from literal import Call  # the child loads both modules from their files (literal.calls gives these)

DENIED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
"""Names BFCL's executor refuses to run, whatever the backend (``execute_multi_turn_func_call``)."""


class NotRun(Exception):
    """A call the dispatcher will not run; the message is the error text the model reads back."""


def long_context(category: str) -> bool:
    """BFCL loads the long-context scenario for these categories (its handler and its checker alike)."""
    return "long_context" in category or "composite" in category


class Backends:
    """The backend instances of one task, as BFCL's executor creates them, and their public methods by name."""

    def __init__(self, entry: dict[str, Any]) -> None:
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        category = entry["id"].rsplit("_", 1)[0]
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        for class_name in entry["involved_classes"]:
            instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
            if class_name not in STATELESS_CLASSES:
                config = copy.deepcopy(entry.get("initial_config", {}).get(class_name, {}))
                instance._load_scenario(config, long_context=long_context(category))
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method

    def run(self, calls: list[Call], as_written: bool = False) -> list[str]:
        """Each call's result as BFCL's executor writes it: a string as it is, a dictionary as JSON (``str`` when
        it does not serialise), anything else through ``str``; an exception as ``Error during execution: ...``.
        A model's calls get their values as BFCL's decoder writes them back; ``as_written`` (the ground truth's
        calls, which BFCL's checker runs from the dataset's own text) passes the values, positional ones too, as
        they are."""
        return [self._run_one(call, as_written) for call in calls]

    def _run_one(self, call: Call, as_written: bool) -> str:
        try:
            method = self._method(call)
            if as_written:
                result = method(*call.positional, **{str(k): v for k, v in call.arguments.items()})
            else:
                result = method(**_arguments(call, self.methods))
        except Exception as exc:
            return f"Error during execution: {exc}"
        if type(result) is str:
            return result
        if type(result) is dict:
            try:
                return json.dumps(result)
            except Exception:
                return str(result)
        return str(result)

    def _method(self, call: Call) -> Callable[..., Any]:
        last = call.name.rsplit(".", 1)[-1]
        if last in DENIED:
            raise NotRun(f"Function call {last} is not allowed.")
        if "." in call.name or not call.spelled_plainly or call.name not in self.methods:
            raise NotRun(f"name '{call.name.split('.', 1)[0]}' is not defined")
        return self.methods[call.name]


def _arguments(call: Call, methods: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    if None in call.arguments:
        raise NotRun("an argument without a name (**)")
    return {str(k): _as_executed(v, methods) for k, v in call.arguments.items()}


def _as_executed(value: Any, methods: dict[str, Callable[..., Any]]) -> Any:
    """The value BFCL's executor would pass: its decoder writes a dictionary whose values are all dictionaries as a
    nested call and any other dictionary with its keys as strings; everything else as ``repr``, read back as it
    was, except a non-finite float."""
    if isinstance(value, dict):
        if value and all(isinstance(v, dict) for v in value.values()):
            name = str(next(iter(value)))
            if name not in methods:
                raise NotRun(f"name '{name}' is not defined")
            raise NotRun(f"a call nested in an argument ({name}) is not run")
        return {_key(k): _as_executed(v, methods) for k, v in value.items()}
    _finite(value)
    return value


def _key(key: Any) -> str:
    text = str(key)
    if any(c in text for c in "'\\\n\r"):
        raise NotRun(f"a dictionary key BFCL cannot write back: {text[:40]!r}")
    return text


def _finite(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotRun(f"name '{value!r}' is not defined")
    if isinstance(value, list | tuple):
        for item in value:
            _finite(item)
