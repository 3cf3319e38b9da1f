"""A tiny document model rendered to both Markdown and self-contained HTML (inline CSS, no scripts, images by
relative path), so ``report.md`` and ``report.html`` always say the same thing.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.results.compare.render import markdown_table


@dataclass(frozen=True)
class Heading:
    """A section heading (level 1-3)."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of plain text."""

    text: str


@dataclass(frozen=True)
class TableBlock:
    """A table of plain-text cells."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Image:
    """An image, referenced by a path relative to the document."""

    src: str
    alt: str


@dataclass(frozen=True)
class BulletList:
    """A bullet list of plain-text items."""

    items: Sequence[str]


Block = Heading | Paragraph | TableBlock | Image | BulletList


@dataclass
class Document:
    """An ordered list of blocks with a title."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        """Append blocks."""
        self.blocks.extend(blocks)


def to_markdown(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown."""
    out = [f"# {doc.title}", ""]
    for block in doc.blocks:
        if isinstance(block, Heading):
            out += [f"{'#' * block.level} {block.text}", ""]
        elif isinstance(block, Paragraph):
            out += [block.text, ""]
        elif isinstance(block, TableBlock):
            out += [markdown_table(block.header, block.rows), ""]
        elif isinstance(block, Image):
            out += [f"![{block.alt}]({block.src})", ""]
        else:
            out += [*[f"- {item}" for item in block.items], ""]
    return "\n".join(out)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1000px;
       padding: 0 1rem; color: #222; }
h1, h2, h3 { line-height: 1.2; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
"""


def to_html(doc: Document) -> str:
    """The document as one HTML page (inline CSS; images referenced relatively)."""
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        '<head><meta charset="utf-8">',
        f"<title>{esc(doc.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(doc.title)}</h1>",
    ]
    for block in doc.blocks:
        if isinstance(block, Heading):
            level = min(6, max(1, block.level))
            out.append(f"<h{level}>{esc(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            out.append(f"<p>{esc(block.text)}</p>")
        elif isinstance(block, TableBlock):
            head = "".join(f"<th>{esc(h)}</th>" for h in block.header)
            body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif isinstance(block, Image):
            out.append(f'<p><img src="{esc(block.src, quote=True)}" alt="{esc(block.alt, quote=True)}"></p>')
        else:
            out.append("<ul>" + "".join(f"<li>{esc(item)}</li>" for item in block.items) + "</ul>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)
