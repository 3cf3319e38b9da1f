"""PNG plots for the report, drawn with matplotlib's object API on the Agg canvas (no pyplot, no display).

Each function takes plain data and a target path, writes one PNG, and returns the path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
MAX_TICK_LABELS = 30


@dataclass(frozen=True)
class RatePoint:
    """A pass rate with its CI at a position on the x axis."""

    x: float
    rate: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Curve:
    """Per-step training metrics of one run."""

    label: str
    steps: Sequence[float]
    reward: Sequence[float]
    val_steps: Sequence[float]
    val_pass: Sequence[float]
    signal_steps: Sequence[float] = ()
    signal_share: Sequence[float] = ()
    """Share of the step's groups whose training reward differed (GRPO's signal)."""
    task_signal_share: Sequence[float] = ()
    """The same for the task's own reward (without shaping)."""


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, format="png")
    return path


def _errorbars(points: Sequence[RatePoint]) -> tuple[list[float], list[float]]:
    lower = [p.rate - p.low if p.low is not None else 0.0 for p in points]
    upper = [p.high - p.rate if p.high is not None else 0.0 for p in points]
    return [max(0.0, v) * 100 for v in lower], [max(0.0, v) * 100 for v in upper]


@dataclass(frozen=True)
class Spread:
    """The lowest and highest seed pass rate of one commit, at a position on the x axis."""

    x: float
    low: float
    high: float


def pass_rate_by_commit(
    runs: Sequence[RatePoint],
    means: Sequence[RatePoint],
    spreads: Sequence[Spread],
    labels: Sequence[str],
    title: str,
    order: str,
    path: Path,
) -> Path:
    """Each run's final pass rate with its CI (points), each commit's seed range (a bar from its lowest to its highest
    seed) and its runs pooled (a tick), commits along x. No line joins commits: with one seed a commit's rate holds
    that seed's luck, and a line through single seeds reads as a trend."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    for i, spread in enumerate(spreads):
        ax.vlines(
            spread.x,
            spread.low * 100,
            spread.high * 100,
            color="tab:gray",
            lw=8,
            alpha=0.35,
            label="seed range (min-max)" if i == 0 else None,
        )
    if runs:
        lo, hi = _errorbars(runs)
        ax.errorbar(
            [p.x for p in runs],
            [p.rate * 100 for p in runs],
            yerr=[lo, hi],
            fmt="o",
            ms=4,
            alpha=0.6,
            capsize=3,
            color="tab:blue",
            label="run (95% CI)",
        )
    if means:
        ax.plot(
            [p.x for p in means],
            [p.rate * 100 for p in means],
            "_",
            ms=18,
            mew=2.5,
            ls="none",
            color="tab:orange",
            label="commit, runs pooled",
        )
    step = max(1, len(labels) // MAX_TICK_LABELS)
    ax.set_xticks(
        range(0, len(labels), step), [labels[i] for i in range(0, len(labels), step)], rotation=45, ha="right"
    )
    ax.set_ylim(-2, 102)
    ax.set_ylabel("pass rate (%)")
    ax.set_xlabel(f"commit ({order})")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def before_after(
    run_labels: Sequence[str],
    before: Sequence[RatePoint | None],
    after: Sequence[RatePoint | None],
    title: str,
    path: Path,
) -> Path:
    """Before- and after-training pass rates of each run, side by side, with CIs."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    width = 0.38
    for offset, points, color, name in (
        (-width / 2, before, "tab:gray", "before"),
        (width / 2, after, "tab:green", "after"),
    ):
        present = [(i, p) for i, p in enumerate(points) if p is not None]
        if not present:
            continue
        lo, hi = _errorbars([p for _, p in present])
        ax.bar(
            [i + offset for i, _ in present],
            [p.rate * 100 for _, p in present],
            width,
            yerr=[lo, hi],
            capsize=2,
            color=color,
            label=name,
        )
    step = max(1, len(run_labels) // MAX_TICK_LABELS)
    ax.set_xticks(
        range(0, len(run_labels), step),
        [run_labels[i] for i in range(0, len(run_labels), step)],
        rotation=45,
        ha="right",
    )
    ax.set_ylim(0, 105)
    ax.set_ylabel("pass rate (%)")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def training_curves(curves: Sequence[Curve], title: str, path: Path) -> Path:
    """Mean reward per step (left axis) and validation pass rate (right axis, dashed) of several runs; below, where
    the runs recorded it, the share of groups with a signal per step (training reward solid, task reward dotted)."""
    with_signal = [c for c in curves if c.signal_steps]
    fig = Figure(figsize=(9, 6.8 if with_signal else 4.2))
    ax = fig.add_subplot(2, 1, 1) if with_signal else fig.add_subplot()
    if with_signal:
        _signal_panel(fig.add_subplot(2, 1, 2), curves)
    ax_val = ax.twinx() if any(c.val_steps for c in curves) else None
    for i, curve in enumerate(curves):
        color = f"C{i % 10}"
        ax.plot(curve.steps, curve.reward, "-", color=color, label=f"{curve.label} reward")
        if ax_val is not None and curve.val_steps:
            ax_val.plot(
                curve.val_steps, [v * 100 for v in curve.val_pass], "--o", ms=3, color=color, label=f"{curve.label} val"
            )
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    if ax_val is not None:
        ax_val.set_ylabel("validation pass (%)")
        ax_val.set_ylim(-2, 102)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    if ax_val is not None:
        more_h, more_n = ax_val.get_legend_handles_labels()
        handles, names = handles + more_h, names + more_n
    ax.legend(handles, names, loc="best", fontsize=7)
    return _save(fig, path)


def _signal_panel(ax: Axes, curves: Sequence[Curve]) -> None:
    for i, curve in enumerate(curves):
        if not curve.signal_steps:
            continue
        color = f"C{i % 10}"
        ax.plot(curve.signal_steps, [v * 100 for v in curve.signal_share], "-o", ms=3, color=color,
                label=f"{curve.label} training reward")  # fmt: skip
        ax.plot(curve.signal_steps, [v * 100 for v in curve.task_signal_share], ":", color=color,
                label=f"{curve.label} task reward")  # fmt: skip
    ax.set_xlabel("step")
    ax.set_ylabel("groups with a signal (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=7)


def task_win_loss(
    task_ids: Sequence[str], a_means: Sequence[float], b_means: Sequence[float], a_label: str, b_label: str, path: Path
) -> Path:
    """Per-task change of pass fraction (B - A), sorted; green: better on B, red: worse, gray: unchanged."""
    diffs = sorted(zip((b - a for a, b in zip(a_means, b_means, strict=True)), task_ids, strict=True))
    better = sum(d > 0 for d, _ in diffs)
    worse = sum(d < 0 for d, _ in diffs)
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    colors = ["tab:green" if d > 0 else "tab:red" if d < 0 else "tab:gray" for d, _ in diffs]
    heights = [d * 100 if d != 0 else 0.8 for d, _ in diffs]  # unchanged tasks drawn as a thin gray stub
    bottoms = [0 if d != 0 else -0.4 for d, _ in diffs]
    ax.bar(range(len(diffs)), heights, bottom=bottoms, color=colors, width=0.9)
    ax.axhline(0, color="black", lw=0.8)
    if len(diffs) <= MAX_TICK_LABELS:
        ax.set_xticks(range(len(diffs)), [t for _, t in diffs], rotation=60, ha="right", fontsize=7)
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(diffs)} tasks, sorted by change")
    ax.set_ylim(-105, 105)
    ax.set_ylabel("B - A pass fraction (pp)")
    ax.set_title(
        f"per task: A = {a_label}, B = {b_label}: {better} better, {worse} worse, {len(diffs) - better - worse} same"
    )
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
