"""Tools the benchmarks' agents use, and the stdio tool servers they run as (:mod:`harness.tools.servers`)."""

from __future__ import annotations

from harness.tools.servers import TOOL_SERVERS


def _load_builtin() -> None:
    from harness.tools import calculator  # noqa: F401  (registers)


TOOL_SERVERS.load = _load_builtin
