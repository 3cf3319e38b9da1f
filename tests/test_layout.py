"""docs/architecture.md's layout section names every module of the harness and nothing that is not there."""

from __future__ import annotations

import re

from support import REPO

LAYOUT_DOC = REPO / "docs" / "architecture.md"
SECTION = re.compile(r"^## Layout.*?\n```\n(.*?)```", re.S | re.M)


def listed_modules() -> set[str]:
    """The modules the layout block names, as paths relative to harness/ (a folder line sets where its indented
    module names live)."""
    block = SECTION.search(LAYOUT_DOC.read_text())
    assert block, "docs/architecture.md has no layout section with a code block"
    found: set[str] = set()
    package = None
    for line in block.group(1).splitlines():
        head = line.split("  ")[0] if not line.startswith(" ") else ""
        if head.startswith("harness/"):
            package = ""
            continue
        if head:  # another top-level folder
            package = None
            continue
        if package is None:
            continue
        words = line.strip().split()
        folder = re.fullmatch(r"([a-z_]+)/", words[0]) if words else None
        if folder and line.startswith("  ") and not line.startswith("    "):
            package = folder.group(1) + "/"
            continue
        if line.startswith("  ") and not line.startswith("    ") and words and words[0].endswith(".py"):
            package = ""  # a module of harness/ itself, after a package's lines
        for word in words:
            if not word.endswith(".py"):
                break
            found.add(package + word)
    return found


def test_the_layout_names_every_module() -> None:
    actual = {str(p.relative_to(REPO / "harness")) for p in (REPO / "harness").rglob("*.py") if p.name != "__init__.py"}
    listed = listed_modules()
    assert not actual - listed, f"modules docs/architecture.md does not name: {sorted(actual - listed)}"
    assert not listed - actual, f"docs/architecture.md names modules that do not exist: {sorted(listed - actual)}"


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "harness").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long


def test_every_package_says_what_its_files_do() -> None:
    for init in (REPO / "harness").rglob("__init__.py"):
        if init.parent == REPO / "harness":
            continue
        text = init.read_text()
        assert text.startswith('"""'), f"{init.relative_to(REPO)} has no docstring"
        for module in init.parent.glob("*.py"):
            if module.name != "__init__.py":
                assert module.stem in text, f"{init.relative_to(REPO)} does not name {module.name}"


def test_the_layout_heading_lists_the_stages_in_the_import_tests_order() -> None:
    from test_import_graph import STAGES

    heading = re.search(r"^## Layout: (.+)$", LAYOUT_DOC.read_text(), re.M)
    assert heading, "docs/architecture.md has no layout heading"
    assert [s.strip() for s in heading.group(1).split("→")] == STAGES
