"""Text renderings of run listings and comparisons: rich table, Markdown, JSON.

Percentages are pass rates x 100; differences are in percentage points (pp).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from rich.console import Console
from rich.table import Table

from harness.results.compare.model import Comparison, PairComparison, SideSummary
from harness.results.store.schema import RunRow

Format = Literal["table", "wide", "md", "json"]
WIDE_FROM = 120
"""Terminal columns from which ``table`` prints the full table; narrower, one line per run or pair (``wide``
forces the table)."""
MAX_LISTED_TASKS = 20


def pct(x: float | None) -> str:
    """``0.4512`` -> ``45.1%``; ``None`` -> ``-``."""
    return "-" if x is None else f"{100 * x:.1f}%"


def ci(low: float | None, high: float | None) -> str:
    """A CI in percent: ``[33.1, 56.2]``."""
    return "" if low is None or high is None else f"[{100 * low:.1f}, {100 * high:.1f}]"


def pp(x: float | None) -> str:
    """A difference in percentage points with sign."""
    return "-" if x is None else f"{100 * x:+.1f} pp"


def p_value(p: float | None) -> str:
    """A p-value, compact."""
    if p is None:
        return "-"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _side_text(side: SideSummary | None, sep: str = " ") -> str:
    if side is None:
        return "-"
    return f"{pct(side.pass_rate)}{sep}{ci(side.ci_low, side.ci_high)}".strip()


def _note(pair: PairComparison) -> str:
    warnings = [f"warning: {w}" for w in pair.warnings]
    if pair.mark == "x":
        return "; ".join([pair.reason, *warnings])
    parts = [_plural(len(pair.new_failures), "new failure"), f"{len(pair.fixed)} fixed"]
    if pair.units == "seeds":
        parts.insert(0, f"units: training seeds, {pair.seeds_a} vs {pair.seeds_b} (smallest p {pair.min_p_value:.2g})")
        if min(pair.seeds_a, pair.seeds_b) == 1:
            parts.insert(
                1,
                "training variance not covered (one training seed on a side); over tasks alone, evaluation noise "
                f"only, p = {p_value(pair.task_p_value)}",
            )
    if pair.units == "seed pairs":
        gains = ", ".join(f"{100 * g:+.1f}" for g in pair.seed_gains)
        parts.insert(0, f"units: training seeds, {pair.seeds_a} paired (gains {gains} pp)")
    own = [s.n_tasks for s in (pair.a, pair.b) if s is not None]
    if any(n != pair.n_paired_tasks for n in own):
        parts.append(f"on the paired tasks A {pct(pair.a_paired_pass)}, B {pct(pair.b_paired_pass)}")
    infra = [s.infra_errors for s in (pair.a, pair.b) if s is not None]
    if any(infra):
        parts.append(f"infra errors excluded A/B: {infra[0]}/{infra[-1]}")
    if pair.detectable_note:
        parts.append(pair.detectable_note)
    return "; ".join([", ".join(parts), *warnings])


def comparison_rows(c: Comparison, sep: str = " ") -> list[list[str]]:
    """One row of cells per pair (``sep`` goes between a value and its CI)."""
    return [
        [
            pair.mark,
            f"{pair.benchmark}/{pair.profile}",
            _side_text(pair.a, sep),
            _side_text(pair.b, sep),
            f"{pp(pair.diff)}{sep}{ci(pair.diff_ci_low, pair.diff_ci_high)}".strip(),
            p_value(pair.p_value),
            str(pair.n_paired_tasks),
            _note(pair),
        ]
        for pair in c.pairs
    ]


COMPARISON_HEADER = [
    "",
    "benchmark/profile",
    "A pass (A's tasks)",
    "B pass (B's tasks)",
    "B - A (paired tasks)",
    "p",
    "paired tasks",
    "note",
]


def task_lines(c: Comparison) -> list[str]:
    lines: list[str] = []
    for pair in c.pairs:
        for title, tasks in (("new failures", pair.new_failures), ("fixed", pair.fixed)):
            if tasks:
                shown = ", ".join(tasks[:MAX_LISTED_TASKS])
                more = f" (+{len(tasks) - MAX_LISTED_TASKS} more)" if len(tasks) > MAX_LISTED_TASKS else ""
                lines.append(f"{pair.benchmark}/{pair.profile} {title}: {shown}{more}")
    return lines


def legend(c: Comparison) -> str:
    return (
        f"A = {c.a_label}, B = {c.b_label}. A pass and B pass are over each side's own tasks; B - A, its CI and p "
        "are over the paired tasks (data on both sides; the note gives both sides' rates on them when the task "
        "sets differ), or over the training seeds when both sides are trained models of different runs (the note "
        f"says so). CIs at {100 * (1 - c.alpha):g}%; the CI of B - A inverts the test, so it excludes 0 "
        f"exactly for + and -. Marks: + improvement, - regression (p < {c.alpha:g}), ~ not significant (the note "
        f"says what it could have told), x not comparable. {c.regressions} regression(s), {c.improvements} "
        "improvement(s), "
        f"{c.not_comparable} not comparable."
    )


def comparison_table(c: Comparison) -> Table:
    """A rich table of the comparison (values above their CIs)."""
    table = Table(title=f"{c.a_label} -> {c.b_label}", caption=legend(c))
    for name in COMPARISON_HEADER:
        table.add_column(name, overflow="fold", no_wrap=name in ("", "p", "paired tasks"))
    styles = {"+": "green", "-": "bold red", "~": "", "x": "yellow"}
    for row, pair in zip(comparison_rows(c, sep="\n"), c.pairs, strict=True):
        table.add_row(*row, style=styles[pair.mark])
    return table


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ") or " "

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def comparison_markdown(c: Comparison) -> str:
    """The comparison as Markdown."""
    parts = [f"### {c.a_label} → {c.b_label}", "", markdown_table(COMPARISON_HEADER, comparison_rows(c)), "", legend(c)]
    tasks = task_lines(c)
    if tasks:
        parts += ["", *[f"- {line}" for line in tasks]]
    return "\n".join(parts) + "\n"


def comparison_json(c: Comparison) -> str:
    """The comparison as JSON (every field, plus the regression and improvement counts)."""
    data = c.model_dump(mode="json")
    data["regressions"] = c.regressions
    data["improvements"] = c.improvements
    data["not_comparable"] = c.not_comparable
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def comparison_lines(c: Comparison) -> list[str]:
    """The comparison for a narrow terminal: one line per pair (mark, A -> B, B - A and its CI, p), its note on a
    second line, then the legend's counts."""
    lines = [f"A = {c.a_label}", f"B = {c.b_label}"]
    for pair in c.pairs:
        a = pct(pair.a.pass_rate) if pair.a else "-"
        b = pct(pair.b.pass_rate) if pair.b else "-"
        diff = f"{pp(pair.diff)} {ci(pair.diff_ci_low, pair.diff_ci_high)}".strip()
        lines.append(f"{pair.mark} {pair.benchmark}/{pair.profile}  {a} -> {b}  {diff}  p {p_value(pair.p_value)}")
        note = _note(pair)
        if note:
            lines.append(f"    {note}")
    lines.append(
        f"+ improvement, - regression (p < {c.alpha:g}), ~ not significant, x not comparable: {c.regressions} -, "
        f"{c.improvements} +, {c.not_comparable} x (--format wide: the full table and legend)"
    )
    return lines


def print_comparison(c: Comparison, fmt: Format, console: Console | None = None) -> None:
    """Print the comparison to stdout (or ``console``) in ``fmt``."""
    if fmt in ("table", "wide"):
        out = console or Console()
        if fmt == "table" and out.width < WIDE_FROM:
            for line in comparison_lines(c):
                out.print(line, markup=False, highlight=False)
        else:
            out.print(comparison_table(c))
        for line in task_lines(c):
            out.print(line, markup=False, highlight=False)
    elif fmt == "md":
        print(comparison_markdown(c), end="")
    else:
        print(comparison_json(c), end="")


# ---------------------------------------------------------------------------------------------------- run lists

_RUNS_HEADER = ["run_id", "started_at", "commit", "benchmark/profile", "status", "seed", "before", "after", "infra b/a"]


def _run_cells(row: RunRow, sep: str = " ") -> list[str]:
    commit = row.git_commit[:10] + ("*" if row.git_dirty else "")
    status = row.status if row.status != "failed" else f"failed ({row.failed_phase})"
    return [
        row.run_id,
        row.started_at,
        commit,
        f"{row.benchmark}/{row.profile}",
        status,
        str(row.seed),
        f"{pct(row.pass_before)}{sep}{ci(row.ci_before_low, row.ci_before_high)}".strip(),
        f"{pct(row.pass_after)}{sep}{ci(row.ci_after_low, row.ci_after_high)}".strip(),
        f"{row.infra_errors_before}/{row.infra_errors_after}",
    ]


def runs_table(rows: Sequence[RunRow], title: str = "runs") -> Table:
    """A rich table of run rows (``*`` after the commit: dirty checkout)."""
    table = Table(title=title, caption="before/after: pass rate [95% CI]; * after a commit: uncommitted changes")
    for name in _RUNS_HEADER:
        table.add_column(name, overflow="fold", no_wrap=name in ("seed", "infra b/a"))
    for row in rows:
        table.add_row(*_run_cells(row, sep="\n"))
    return table


def short_id(run_id: str) -> str:
    """``math-20261203T073813Z-c8c2a1`` -> ``1203T0738-c8c2a1``: month, day, time to the minute, the random suffix."""
    parts = run_id.split("-")
    if len(parts) >= 3 and len(parts[-2]) == 16 and parts[-2][8] == "T":
        stamp = parts[-2]
        return f"{stamp[4:8]}T{stamp[9:13]}-{parts[-1]}"
    return run_id


def runs_lines(rows: Sequence[RunRow]) -> list[str]:
    """Runs for a narrow terminal: one line each (short id, profile, seed, status, before -> after, commit)."""
    lines = []
    for row in rows:
        status = {"complete": "ok", "failed": f"failed:{row.failed_phase}", "incomplete": "stopped"}[row.status]
        commit = row.git_commit[:7] + ("*" if row.git_dirty else "")
        change = f"{pct(row.pass_before)} -> {pct(row.pass_after)}"
        lines.append(
            f"{short_id(row.run_id)}  {row.benchmark}/{row.profile}  s{row.seed}  {status}  {change}  {commit}"
        )
    return lines


def runs_markdown(rows: Sequence[RunRow]) -> str:
    """Run rows as a Markdown table."""
    return markdown_table(_RUNS_HEADER, [_run_cells(r) for r in rows]) + "\n"


def runs_json(rows: Sequence[RunRow]) -> str:
    """Run rows as a JSON list (every field)."""
    return json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n"


def print_runs(rows: Sequence[RunRow], fmt: Format, console: Console | None = None) -> None:
    """Print run rows in ``fmt``."""
    if fmt in ("table", "wide"):
        out = console or Console()
        if fmt == "table" and out.width < WIDE_FROM:
            for line in runs_lines(rows):
                out.print(line, markup=False, highlight=False)
            if rows:
                out.print("(before -> after pass rates; * dirty checkout; --format wide: every column)")
        else:
            out.print(runs_table(rows))
    elif fmt == "md":
        print(runs_markdown(rows), end="")
    else:
        print(runs_json(rows), end="")
