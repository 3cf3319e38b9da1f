"""Stage 4, tools: what the benchmarks' agents call, declared here and started by a backend.

``servers`` (a stdio tool server's declaration: environment, code, packages, limits; its local command),
``calculator`` (the MCP calculator and the agent's session with it), ``schema`` (MCP tool schemas as plain
functions an agent framework reads). A new tool server is a ``ToolServer`` subclass registered with
``register_tool_server``.
"""

from __future__ import annotations

from harness.tools.servers import TOOL_SERVERS


def _load_builtin() -> None:
    from harness.tools import calculator  # noqa: F401  (registers)


TOOL_SERVERS.load = _load_builtin
