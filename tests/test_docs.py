"""The README stays a short manual, and the pages it sends a reader to exist.

The README says what a user does; everything else is a topic page in docs/ (measurements in bench/results/). So:
the README is at most 250 lines, every page in docs/ is linked from it, and every relative link in the README and
the pages points at a file or folder of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from support import REPO

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text(encoding="utf-8")) if not re.match(r"[a-z]+:|#", t)]


def test_the_readme_is_a_short_manual() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move what is not a user's next step into docs/"


def test_every_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.split("#")[0]).resolve() for t in relative_links(README)}
    assert PAGES, "docs/ has no pages"
    unlinked = [p.name for p in PAGES if p.resolve() not in linked]
    assert not unlinked, f"pages in docs/ that README.md does not link: {unlinked}"


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page in (README, *PAGES)
        for target in relative_links(page)
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert not broken, f"links to nothing: {broken}"
