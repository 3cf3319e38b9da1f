"""No import circles between the harness's modules: the graph of every runtime import (module level or inside a
function; ``if TYPE_CHECKING:`` imports excluded, since they never run) has no cycle. ``from pkg import sub``
counts as an import of the submodule ``pkg.sub``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support import REPO


def modules() -> dict[str, Path]:
    out = {}
    for path in (REPO / "harness").rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports(tree: ast.AST, known: dict[str, Path]) -> Iterator[str]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in known else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {n for n in imports(ast.parse(path.read_text()), known) if n in known and n != name}
        for name, path in known.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the whole package was read
    found = cycles(graph)
    detail = "; ".join(" <-> ".join(c) for c in found)
    assert not found, f"import circles: {detail}"
