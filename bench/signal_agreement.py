"""Predicted against measured GRPO signal, on the recorded runs that have both.

For every complete trained row whose manifest's ``train_metrics`` count groups (runs recorded since the engines
measure it): the share of groups expected to differ in the task's reward, from the run's own baseline (its
before-phase outcomes: per task when each task was sampled at least twice, else the pooled rate for every task,
an upper bound) at the engine's group size, beside the share measured over all its training steps, for the task's
reward and for the shaped training reward. The baseline is the evaluation split's; the groups are the training
split's, sampled at the training temperature: where those differ, so may the shares.

Run: ``python bench/signal_agreement.py [--results DIR] [--out FILE]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from harness.engines import get_engine_class
from harness.engines.signal import expected_signal_share
from harness.results.store.store import ResultStore
from harness.spec import BenchmarkSpec


def rates_of(store: ResultStore, benchmark: str, run_id: str) -> tuple[list[float], str]:
    by_task: dict[str, list[bool]] = defaultdict(list)
    for o in store.outcomes(benchmark, run_id):
        if o.phase == "before" and o.error_kind not in ("infra", "timeout"):
            by_task[o.task_id].append(o.passed)
    if by_task and min(len(v) for v in by_task.values()) >= 2:
        return [sum(v) / len(v) for v in by_task.values()], "per task"
    passes = [p for v in by_task.values() for p in v]
    return [sum(passes) / len(passes)] if passes else [], "pooled"


def table(store: ResultStore) -> list[str]:
    lines = [
        "| run | profile | engine | n | baseline | predicted (task) | measured (task) | measured (training) | steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for benchmark in store.benchmarks():
        for row in store.runs(benchmark):
            if row.status != "complete" or row.train_steps == 0 or row.pass_before is None:
                continue
            manifest = store.manifest(benchmark, row.run_id)
            steps = [m for m in manifest.train_metrics if "groups" in m]
            if not steps:
                continue
            spec = BenchmarkSpec.model_validate(manifest.spec.resolved)
            n = get_engine_class(spec.training.engine).group_size(spec) or 0
            rates, how = rates_of(store, benchmark, row.run_id)
            groups = sum(m["groups"] for m in steps)
            task = sum(m["task_signal_share"] * m["groups"] for m in steps) / groups if groups else 0.0
            training = sum(m["signal_groups"] for m in steps) / groups if groups else 0.0
            lines.append(
                f"| {row.run_id} | {benchmark}/{row.profile} | {row.engine} | {n} | {100 * row.pass_before:.1f}% "
                f"({how}) | {100 * expected_signal_share(rates, n):.1f}% | {100 * task:.1f}% | {100 * training:.1f}% "
                f"| {len(steps)} ({int(groups)} groups) |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=None, help="results folder (default: the checkout's)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args()
    text = "\n".join(table(ResultStore(args.results))) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
