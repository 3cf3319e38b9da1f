"""The harness's import graph: no circles, and every import points up the stages.

Every import counts, wherever it is written: at module level, inside a function, or under ``if TYPE_CHECKING:``
(a type-only import is still a dependency of the code's meaning). ``from pkg import sub`` counts as an import of
the submodule ``pkg.sub``. The stages, in the order the README's layout lists them, may each use those before it and
never those after: the shared primitives, results, spec, assets, tools, backends, serving, benchmark, rollout,
engines, run, and the command line. ``results`` (the result tables, their statistics, comparison and reports) is a
leaf: it uses only the shared primitives and itself, so every stage may record and read results. A benchmark's code
(``benchmarks/``) imports from the harness only its public package, ``harness.benchmark``.
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
    for node in ast.walk(tree):
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


STAGES = ["results", "spec", "assets", "tools", "backends", "serving", "benchmark", "rollout", "engines", "run"]
PRIMITIVES = {"errors", "exits", "paths", "records", "registry", "ui", "timing"}


def stage(module: str) -> int:
    """0 for a shared primitive, 1.. for the stages in order, one more for the command line."""
    part = module.split(".")[1] if "." in module else ""
    if part in PRIMITIVES or module == "harness":
        return 0
    if part == "cli":
        return len(STAGES) + 1
    return STAGES.index(part) + 1


def test_every_module_belongs_to_a_stage() -> None:
    for module in import_graph():
        stage(module)  # a module outside the known stages raises ValueError, naming it


def test_imports_point_up_the_stages() -> None:
    upward = [f"{a} -> {b}" for a, targets in import_graph().items() for b in targets if stage(b) > stage(a)]
    assert not upward, "imports of a later stage: " + "; ".join(sorted(upward))


def test_results_uses_only_the_primitives_and_itself() -> None:
    graph = import_graph()
    results = [name for name in graph if name == "harness.results" or name.startswith("harness.results.")]
    assert len(results) > 30  # the whole package was read
    outside = [
        f"{a} -> {b}"
        for a in results
        for b in graph[a]
        if stage(b) != 0 and not (b == "harness.results" or b.startswith("harness.results."))
    ]
    assert not outside, "results imports outside the primitives and itself: " + "; ".join(sorted(outside))


def test_type_checking_imports_count() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.run import runner\n")
    assert "harness.run.runner" in set(imports(tree, modules()))


def test_benchmarks_import_only_the_public_package() -> None:
    known = modules()
    files = sorted((REPO / "benchmarks").rglob("*.py"))
    assert len(files) > 10  # every benchmark was read
    outside = [
        f"{path.relative_to(REPO)} -> {name}"
        for path in files
        for name in imports(ast.parse(path.read_text()), known)
        if (name == "harness" or name.startswith("harness.")) and name != "harness.benchmark"
    ]
    assert not outside, "benchmark code importing harness modules other than harness.benchmark: " + "; ".join(outside)


def test_the_checker_sees_a_benchmark_import_past_the_public_package() -> None:
    tree = ast.parse(
        "from harness.benchmark import Task\nfrom harness.benchmark import protocol\nimport harness.paths\n"
    )
    assert list(imports(tree, modules())) == ["harness.benchmark", "harness.benchmark.protocol", "harness.paths"]
