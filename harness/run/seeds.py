"""Several training seeds of one benchmark profile: which seeds, one run each, and the seed-level pooled result."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from harness.results.compare.compare import compare
from harness.results.compare.render import ci, p_value, pp
from harness.results.stats.aggregate import pool
from harness.results.stats.summary import summarize_counts
from harness.results.store.schema import RunRow
from harness.results.store.sources import parse_source
from harness.results.store.store import ResultStore
from harness.run.reporter import Reporter
from harness.run.runner import Runner
from harness.spec.options import RunOptions


def seed_list(spec_seeds: Sequence[int], first: int | None, count: int) -> list[int]:
    """``count`` seeds: from ``first`` upward when given, else the spec's seeds and then the next unused ones."""
    if first is not None:
        return [first + i for i in range(count)]
    seeds = list(spec_seeds[:count])
    while len(seeds) < count:
        seeds.append(max(seeds, default=-1) + 1)
    return seeds


def run_seeds(options: RunOptions, seeds: Sequence[int], reporter: Reporter) -> list[RunRow]:
    """One run per seed, in order; several seeds share a group id (the rows' ``group_id``)."""
    group = f"{options.benchmark}-{uuid.uuid4().hex[:8]}" if len(seeds) > 1 else None
    return [Runner(options.model_copy(update={"seed": s, "group_id": group}), reporter).run() for s in seeds]


def pooled_lines(rows: Sequence[RunRow], results_root: Path | None = None) -> list[str]:
    """The seeds' outcomes pooled by task (pass rate with an interval clustered by task, as ``harness compare``), then
    before against after with the seeds as the units (a t-test over each seed's gain) when they trained."""
    store = ResultStore(results_root)
    records = store.outcome_records(rows[0].benchmark, [row.run_id for row in rows])
    lines = []
    for phase in ("before", "after"):
        s = summarize_counts(pool(records, phase))
        if s.pass_rate is not None and s.ci is not None:
            lines.append(
                f"{len(rows)} seeds, {phase}: pooled pass@1 {s.pass_rate:.1%} [{s.ci[0]:.1%}, {s.ci[1]:.1%}] "
                f"over {s.n_tasks} tasks"
            )
    if len({row.seed for row in rows}) < 2 or not any(row.train_steps > 0 for row in rows):
        return lines
    ids = ",".join(row.run_id for row in rows)
    result = compare(parse_source(f"run:{ids}@before", store.root), parse_source(f"run:{ids}@after", store.root))
    for pair in result.pairs:
        if pair.units != "seed pairs":
            continue
        gains = ", ".join(f"{100 * g:+.1f}" for g in pair.seed_gains)
        line = f"{len(pair.seed_gains)} seeds, before -> after: {pair.mark} {pp(pair.diff)}"
        line += f" {ci(pair.diff_ci_low, pair.diff_ci_high)} p {p_value(pair.p_value)}"
        lines.append(f"{line} ({pair.test}; gains {gains} pp)")
        if pair.detectable_note:
            lines.append(f"  {pair.detectable_note}")
    return lines
