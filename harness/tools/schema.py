"""Tool schemas as a small model reads them.

MCP servers built on pydantic describe their arguments with generated ``title`` keys (``"title":
"calculateArguments"`` for the object, ``"title": "Expression"`` per field). They carry no meaning for the model,
and small models copy them: Qwen2.5-Coder-0.5B called the calculator ``calculateArguments``. The agent gets each
MCP function with the same name, description and caller, and its argument schema without those titles.
"""

from __future__ import annotations

from typing import Any


def without_titles(schema: Any) -> Any:
    """``schema`` with every generated ``title`` annotation removed (a property *named* ``title`` stays)."""
    if isinstance(schema, list):
        return [without_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: without_titles(sub) for name, sub in value.items()}
        else:
            out[key] = without_titles(value)
    return out


def readable_functions(mcp_tool: Any) -> list[Any]:
    """The functions of an entered Agent Framework MCP tool, with argument schemas :func:`without_titles`."""
    from agent_framework import FunctionTool

    return [
        FunctionTool(
            func=f.func,
            name=f.name,
            description=f.description,
            approval_mode=f.approval_mode,
            additional_properties=f.additional_properties,
            input_model=without_titles(f.parameters()),
        )
        for f in mcp_tool.functions
    ]
