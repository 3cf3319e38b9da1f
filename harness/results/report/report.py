"""``harness report``: ``report.html`` + ``report.md`` + PNG plots of the working tree's result tables.

Per (benchmark, profile):

* pass rate per commit with CIs: every complete run's final pass rate (after training when measured, else before)
  with the CI recorded in its row, each commit's seed range (lowest to highest seed, a seed's runs averaged), and
  each commit's runs pooled by task through the shared statistics
  (:func:`harness.results.stats.summary.summarize_counts`, as ``harness compare`` pools a side): the pass rate and
  interval the table shows; no line joins commits (a line through single seeds reads as a trend); commits in git
  order when every commit is known to git, else in order of their first run's start time (the plot says which);
* before/after pass rate of the most recent runs;
* per-step reward and validation curves of recent runs whose manifest has ``train_metrics``
  (a list of ``{"step": int, "reward_mean": float, "val_pass_rate": float (optional)}``; step 0 may carry only the
  validation before training);
* per-task win/loss between two commits: ``--against REV`` (REV's results vs the working tree's), or by default
  the two most recently measured commits of the working tree.

The HTML references the PNGs by relative path and is otherwise self-contained (inline CSS, no scripts).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ResultsError
from harness.paths import artifacts_dir
from harness.results.compare.compare import Side, compare, compare_pair, side_counts
from harness.results.compare.model import PairComparison
from harness.results.compare.render import COMPARISON_HEADER, ci, comparison_rows, p_value, pct, pp
from harness.results.report import plots
from harness.results.report.document import (
    BulletList,
    Document,
    Heading,
    Image,
    Paragraph,
    TableBlock,
    to_html,
    to_markdown,
)
from harness.results.stats.aggregate import pool
from harness.results.stats.summary import RateSummary, summarize_counts
from harness.results.store import git
from harness.results.store.atomic import atomic_write, ensure_dir
from harness.results.store.manifest import Manifest
from harness.results.store.schema import RunRow, utc_now_iso
from harness.results.store.sources import (
    GroupKey,
    RevisionSource,
    Source,
    WorktreeSource,
    comparability_key,
    group_runs,
)

MAX_BEFORE_AFTER_RUNS = 30
MAX_CURVE_RUNS = 5
MAX_LISTED_TASKS = 30
MARK_WORDS = {"+": "significant improvement", "-": "significant regression", "~": "not significant", "x": "n/a"}


@dataclass(frozen=True)
class ReportFiles:
    """What a report wrote."""

    html: Path
    markdown: Path
    images: list[Path] = field(default_factory=list)


def slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


# ---------------------------------------------------------------------------------------------------- ordering


def _git_positions(root: Path) -> dict[str, int] | None:
    try:
        top, _ = git.repo_location(root)
        return git.commit_order(top)
    except ResultsError:
        return None


def _position(commit: str, positions: dict[str, int]) -> int | None:
    if commit in positions:
        return positions[commit]
    if len(commit) >= 7:
        matches = [pos for sha, pos in positions.items() if sha.startswith(commit)]
        if len(matches) == 1:
            return matches[0]
    return None


def order_commits(rows: Sequence[RunRow], positions: dict[str, int] | None) -> tuple[list[str], str]:
    """The distinct commits of ``rows``, oldest first, and the name of the ordering used."""
    first_start: dict[str, Any] = {}
    for row in rows:
        if row.git_commit not in first_start or row.started < first_start[row.git_commit]:
            first_start[row.git_commit] = row.started
    commits = list(first_start)
    if positions is not None:
        pos = {c: _position(c, positions) for c in commits}
        if all(p is not None for p in pos.values()):
            return sorted(commits, key=lambda c: (pos[c], first_start[c])), "git order"
    return sorted(commits, key=lambda c: first_start[c]), "first run start time"


# ---------------------------------------------------------------------------------------------------- sections


@dataclass
class _Context:
    out: Path
    source: WorktreeSource
    positions: dict[str, int] | None
    doc: Document
    images: list[Path] = field(default_factory=list)

    def image(self, path: Path, alt: str) -> None:
        self.images.append(path)
        self.doc.add(Image(path.name, alt))


def _pooled(ctx: _Context, benchmark: str, group: Sequence[RunRow]) -> RateSummary:
    """One commit's runs pooled by task (each run's final phase), summarised as everywhere else."""
    return summarize_counts(pool(ctx.source.outcome_records(benchmark, [r.run_id for r in group])))


def _pass_by_commit(ctx: _Context, key: GroupKey, complete: list[RunRow]) -> None:
    measured = [r for r in complete if r.final_pass is not None]
    if not measured:
        ctx.doc.add(Paragraph("No complete run with a measured pass rate."))
        return
    commits, order = order_commits(measured, ctx.positions)
    index = {c: i for i, c in enumerate(commits)}
    by_commit: dict[str, list[RunRow]] = defaultdict(list)
    for row in measured:
        by_commit[row.git_commit].append(row)
    pooled = {c: _pooled(ctx, key[0], by_commit[c]) for c in commits}
    points = []
    for commit, group in by_commit.items():
        width = 0.3 if len(group) > 1 else 0.0
        for j, row in enumerate(group):
            low, high = row.final_ci
            offset = width * (j / (len(group) - 1) - 0.5) if len(group) > 1 else 0.0
            points.append(plots.RatePoint(index[commit] + offset, row.final_pass or 0.0, low, high))
    means = [
        plots.RatePoint(i, summary.pass_rate, None, None)
        for i, summary in enumerate(pooled[c] for c in commits)
        if summary.pass_rate is not None
    ]
    seeds = {c: seed_rates(by_commit[c]) for c in commits}
    spreads = [plots.Spread(index[c], min(r), max(r)) for c, r in seeds.items() if len(r) > 1]
    labels = [c[:8] for c in commits]
    path = ctx.out / f"{slug(key[0])}-{slug(key[1])}-pass-by-commit.png"
    title = f"{key[0]}/{key[1]}: final pass rate per commit"
    plots.pass_rate_by_commit(points, means, spreads, labels, title, order, path)
    ctx.image(path, f"pass rate per commit for {key[0]}/{key[1]}")
    rows = []
    for c in commits:
        group, summary = by_commit[c], pooled[c]
        rates = seeds[c]
        spread = f"{pct(min(rates))} – {pct(max(rates))}" if len(rates) > 1 else "one seed"
        interval = ci(*summary.ci) if summary.ci else "-"
        last = max(r.started_at for r in group)
        rows.append([c[:10], str(len(rates)), str(len(group)), pct(summary.pass_rate), interval, spread, last])
    ctx.doc.add(
        Paragraph(
            f"Commits ordered by {order}. Final pass rate = after training when measured, else before. A commit's "
            "pass rate and 95% CI pool its runs by task, as `harness compare` does (the mean over tasks of each "
            "task's pass fraction; Wilson over tasks, task-clustered with several samples per task): they cover "
            "evaluation noise only. The seed range (each seed's runs averaged) is the training variance the CI "
            "leaves out; a commit measured with one seed has none to show, so no line joins the commits, and "
            "`harness compare` of trained runs counts seeds, not tasks (one seed a side is ~)."
        ),
        TableBlock(
            ["commit", "seeds", "runs", "pass rate (pooled)", "95% CI", "seed range (min–max)", "last run"], rows
        ),
    )


def seed_rates(group: Sequence[RunRow]) -> list[float]:
    """The final pass rate of each distinct seed of ``group`` (its runs averaged), seeds in order."""
    by_seed: dict[int, list[float]] = defaultdict(list)
    for row in group:
        by_seed[row.seed].append(row.final_pass or 0.0)
    return [sum(v) / len(v) for _, v in sorted(by_seed.items())]


def _before_after(ctx: _Context, key: GroupKey, complete: list[RunRow]) -> None:
    recent = sorted(
        (r for r in complete if r.pass_before is not None or r.pass_after is not None), key=lambda r: r.started
    )[-MAX_BEFORE_AFTER_RUNS:]
    if not any(r.pass_after is not None for r in recent):
        return

    def point(rate: float | None, low: float | None, high: float | None) -> plots.RatePoint | None:
        return None if rate is None else plots.RatePoint(0, rate, low, high)

    path = ctx.out / f"{slug(key[0])}-{slug(key[1])}-before-after.png"
    plots.before_after(
        [r.run_id for r in recent],
        [point(r.pass_before, r.ci_before_low, r.ci_before_high) for r in recent],
        [point(r.pass_after, r.ci_after_low, r.ci_after_high) for r in recent],
        f"{key[0]}/{key[1]}: before vs after training (last {len(recent)} runs)",
        path,
    )
    ctx.doc.add(Heading("Before / after training", 3))
    ctx.image(path, f"before and after training for {key[0]}/{key[1]}")
    ctx.doc.add(
        TableBlock(
            ["run", "commit", "seed", "before", "after", "change", "train steps"],
            [
                [
                    r.run_id,
                    r.git_commit[:10],
                    str(r.seed),
                    f"{pct(r.pass_before)} {ci(r.ci_before_low, r.ci_before_high)}",
                    f"{pct(r.pass_after)} {ci(r.ci_after_low, r.ci_after_high)}",
                    pp(None if r.pass_after is None or r.pass_before is None else r.pass_after - r.pass_before),
                    str(r.train_steps),
                ]
                for r in recent
            ],
        )
    )


def _curve(run_id: str, manifest: Manifest) -> plots.Curve | None:
    """Reward per training step, validation pass rate per validated step (step 0: before training) and the share of
    groups with a signal per step, where recorded."""
    steps, reward, val_steps, val_pass = [], [], [], []
    signal_steps, signal, task_signal = [], [], []
    for item in manifest.train_metrics:
        if not isinstance(item.get("step"), int | float):
            continue
        step, mean = float(item["step"]), item.get("reward_mean")
        if isinstance(item.get("signal_share"), int | float):
            signal_steps.append(step)
            signal.append(float(item["signal_share"]))
            task_signal.append(float(item.get("task_signal_share", 0.0)))
        if isinstance(mean, int | float):
            steps.append(step)
            reward.append(float(mean))
        val = item.get("val_pass_rate", item.get("val_pass"))
        if isinstance(val, int | float):
            val_steps.append(step)
            val_pass.append(float(val))
    if not (steps or val_steps):
        return None
    return plots.Curve(run_id, steps, reward, val_steps, val_pass, signal_steps, signal, task_signal)


def _training(ctx: _Context, key: GroupKey, complete: list[RunRow]) -> None:
    trained = sorted((r for r in complete if r.train_steps > 0), key=lambda r: r.started)[-MAX_CURVE_RUNS:]
    curves, missing = [], []
    for row in trained:
        try:
            curve = _curve(row.run_id, ctx.source.manifest(row.benchmark, row.run_id))
        except ResultsError:
            missing.append(row.run_id)
            continue
        if curve is not None:
            curves.append(curve)
    if not curves:
        return
    path = ctx.out / f"{slug(key[0])}-{slug(key[1])}-training.png"
    plots.training_curves(curves, f"{key[0]}/{key[1]}: training curves", path)
    ctx.doc.add(Heading("Training curves", 3))
    ctx.image(path, f"training curves for {key[0]}/{key[1]}")
    if missing:
        ctx.doc.add(Paragraph(f"Manifest unreadable for: {', '.join(missing)}."))


def _win_loss(ctx: _Context, key: GroupKey, a: Side, b: Side) -> PairComparison:
    pair = compare_pair(key, a, b)
    ctx.doc.add(Heading(f"Per task: {a.label} → {b.label}", 3))
    if pair.mark == "x":
        ctx.doc.add(Paragraph(f"Not comparable: {pair.reason}."))
        return pair
    ca, cb = side_counts(a), side_counts(b)
    common = sorted(set(ca.task_ids) & set(cb.task_ids))
    pa, pb = ca.select(common), cb.select(common)
    path = ctx.out / f"{slug(key[0])}-{slug(key[1])}-tasks.png"
    plots.task_win_loss(common, list(pa.means), list(pb.means), a.label, b.label, path)
    ctx.image(path, f"per-task change for {key[0]}/{key[1]}")
    ctx.doc.add(
        Paragraph(
            f"B − A = {pp(pair.diff)} {ci(pair.diff_ci_low, pair.diff_ci_high)}, p = {p_value(pair.p_value)} "
            f"({pair.test}, {pair.n_paired_tasks} paired tasks): {MARK_WORDS[pair.mark]} ({pair.mark})."
        )
    )
    items = []
    for title, tasks in (("New failures", pair.new_failures), ("Fixed", pair.fixed)):
        if tasks:
            more = f" (+{len(tasks) - MAX_LISTED_TASKS} more)" if len(tasks) > MAX_LISTED_TASKS else ""
            items.append(f"{title} ({len(tasks)}): {', '.join(tasks[:MAX_LISTED_TASKS])}{more}")
    if items:
        ctx.doc.add(BulletList(items))
    return pair


def _default_sides(
    source: Source, complete: list[RunRow], positions: dict[str, int] | None
) -> tuple[Side, Side] | None:
    """The two most recently measured commits (comparable with the latest run) of the working tree."""
    if not complete:
        return None
    latest = max(complete, key=lambda r: r.started)
    comparable = [r for r in complete if comparability_key(r) == comparability_key(latest)]
    commits, _ = order_commits(comparable, positions)
    if len(commits) < 2:
        return None
    prev, last = commits[-2], commits[-1]
    return (
        Side(prev[:10], source, [r for r in comparable if r.git_commit == prev]),
        Side(last[:10], source, [r for r in comparable if r.git_commit == last]),
    )


# ---------------------------------------------------------------------------------------------------- driver


def build_report(
    out: Path, *, root: Path | None = None, benchmark: str | None = None, against: str | None = None
) -> ReportFiles:
    """Write the report into ``out`` and return the files written."""
    ensure_dir(out)
    source = WorktreeSource(root)
    rows = source.runs(benchmark)
    positions = _git_positions(source.store.root)
    doc = Document("Results report")
    ctx = _Context(out, source, positions, doc)
    doc.add(
        Paragraph(
            f"Generated {utc_now_iso()} from {source.store.root}: {len(rows)} runs"
            + (f" of benchmark {benchmark}" if benchmark else "")
            + ". Pass rates exclude samples lost to infrastructure errors."
        )
    )
    revision = RevisionSource(against, root) if against else None
    rev_groups = revision.groups(benchmark) if revision else {}
    latest_groups = source.groups(benchmark)
    if revision is not None:
        comparison = compare(revision, source, benchmark=benchmark)
        doc.add(
            Heading(f"Comparison: {revision.label} → working tree"),
            TableBlock(COMPARISON_HEADER, comparison_rows(comparison)),
        )
    if not rows:
        doc.add(Paragraph("No runs recorded."))
    for key, group in sorted(group_runs(rows).items()):
        complete = [r for r in group if r.status == "complete"]
        statuses = ", ".join(f"{sum(r.status == s for r in group)} {s}" for s in ("complete", "failed", "incomplete"))
        doc.add(Heading(f"{key[0]} / {key[1]}"), Paragraph(f"{len(group)} runs: {statuses}."))
        _pass_by_commit(ctx, key, complete)
        _before_after(ctx, key, complete)
        _training(ctx, key, complete)
        if revision is not None:
            latest = latest_groups.get(key)
            if key in rev_groups and latest:
                _win_loss(ctx, key, Side(revision.label, revision, rev_groups[key]), Side("worktree", source, latest))
        else:
            sides = _default_sides(source, complete, positions)
            if sides is not None:
                _win_loss(ctx, key, *sides)
    md_path, html_path = out / "report.md", out / "report.html"
    atomic_write(md_path, to_markdown(doc).encode("utf-8"))
    atomic_write(html_path, to_html(doc).encode("utf-8"))
    return ReportFiles(html_path, md_path, ctx.images)


@dataclass
class ReportCommand:
    """``harness report``: write the report into ``out`` (default ``artifacts/report``)."""

    out: Path | None = None
    benchmark: str | None = None
    against: str | None = None
    root: Path | None = None

    def run(self) -> ReportFiles:
        """Build the report and return its files."""
        return build_report(
            self.out or artifacts_dir() / "report", root=self.root, benchmark=self.benchmark, against=self.against
        )


__all__ = ["ReportCommand", "ReportFiles", "build_report", "order_commits", "slug"]
