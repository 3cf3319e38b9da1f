"""Scale check of result loading and ``compare``: 1,000 runs x 50 tasks, target < 1 s.

Builds a synthetic store in a temporary git repository (2 benchmarks x 2 profiles x 50 code commits x 5 seeds =
1,000 runs, 50 tasks each, one sample per task and phase), committed in two commits so that ``HEAD~1`` lacks the
last code commit's runs. The files are written with the store's own encoders (``harness.results.store.codec``), not
through ``ResultStore.append_run``: 1,000 fsync'ed appends would time the disk, not the reader.

Scenarios, each timed end to end (parse sources, read and validate tables, pool outcomes, statistics):

* ``load``: ``ResultStore.runs()`` -- every ``runs.csv`` read, checksum-verified and validated row by row;
* ``compare HEAD~1 .``: the usual CI call -- runs tables at a revision (via ``git cat-file``) and in the working
  tree, plus the outcomes of the latest measured commit of each (benchmark, profile) only;
* ``compare all runs``: worst case -- ``run:`` lists of 500 vs 500 runs, so every one of the 1,000 outcome files
  is read, validated and pooled.

Baseline, measured in the same process on the same files: plain ``pandas.read_csv`` of exactly the files the
scenario reads (no validation, no statistics). Ratios are ours / baseline.

Why no consolidated outcomes cache (e.g. one parquet file keyed by checksum): compare reads only the outcome
files of the runs it pools -- typically a handful -- and even the all-runs case is dominated by per-file
overhead, where the stdlib ``csv`` reader on small files is already faster than ``pandas.read_csv`` (see the
ratios). A cache would add a second source of truth to keep consistent for no measurable gain at this scale.

Run: ``python bench/compare_scale.py`` (``--runs``/``--tasks`` to change the size).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.results.compare.compare import compare
from harness.results.stats.estimators import wilson_interval
from harness.results.store import layout
from harness.results.store.checksums import FileSums
from harness.results.store.codec import encode_checksum, encode_manifest, encode_outcomes, encode_runs, sha256_hex
from harness.results.store.manifest import Manifest
from harness.results.store.schema import RunRow, TaskOutcome
from harness.results.store.sources import RevisionSource, RunIdsSource, WorktreeSource
from harness.results.store.store import ResultStore

BENCHMARKS = ("math", "tools")
PROFILES = ("smoke", "full")
SEEDS = 5


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def synthetic_runs(n_runs: int, n_tasks: int) -> list[tuple[RunRow, list[TaskOutcome]]]:
    """Runs spread over benchmarks, profiles, commits and seeds; pass probability drifts by commit."""
    rng = random.Random(1234)
    groups = [(b, p) for b in BENCHMARKS for p in PROFILES]
    commits = max(1, n_runs // (len(groups) * SEEDS))
    out: list[tuple[RunRow, list[TaskOutcome]]] = []
    for c in range(commits):
        sha = f"{c:040x}"
        for bench, profile in groups:
            for seed in range(SEEDS):
                if len(out) == n_runs:
                    return out
                run_id = f"{bench}-{profile}-c{c:03d}-s{seed}"
                p_before, p_after = 0.3, 0.4 + 0.3 * rng.random()
                outcomes = []
                for phase, p in (("before", p_before), ("after", p_after)):
                    for t in range(n_tasks):
                        ok = rng.random() < p
                        infra = rng.random() < 0.01
                        outcomes.append(
                            TaskOutcome(
                                phase=phase,  # type: ignore[arg-type]
                                task_id=f"task-{t:04d}",
                                sample=0,
                                reward=float(ok and not infra),
                                passed=ok and not infra,
                                error_kind="infra" if infra else "",
                            )
                        )
                rates = {}
                for phase in ("before", "after"):
                    valid = [o for o in outcomes if o.phase == phase and not o.is_infra]
                    k = sum(o.passed for o in valid)
                    rates[phase] = (k / len(valid), *wilson_interval(k, len(valid)))
                row = RunRow(
                    run_id=run_id,
                    group_id=f"{bench}-{profile}-c{c:03d}",
                    benchmark=bench,
                    profile=profile,
                    status="complete",
                    started_at="2025-01-01T00:00:00Z".replace("01T00", f"{1 + c // 24:02d}T{c % 24:02d}"),
                    git_commit=sha,
                    git_dirty=False,
                    spec_hash="spec",
                    dataset_sha256="d" * 64,
                    model="synthetic",
                    model_hash_before="m0",
                    model_hash_after="m1",
                    engine="trl",
                    backend="llama.cpp",
                    seed=seed,
                    eval_split="test",
                    n_tasks=n_tasks,
                    samples_per_task=1,
                    pass_before=rates["before"][0],
                    ci_before_low=rates["before"][1],
                    ci_before_high=rates["before"][2],
                    pass_after=rates["after"][0],
                    ci_after_low=rates["after"][1],
                    ci_after_high=rates["after"][2],
                    infra_errors_before=sum(o.is_infra for o in outcomes if o.phase == "before"),
                    infra_errors_after=sum(o.is_infra for o in outcomes if o.phase == "after"),
                    train_steps=100,
                    wall_setup_s=1.0,
                    wall_baseline_s=2.0,
                    wall_train_s=30.0,
                    wall_eval_s=2.0,
                    hardware="synthetic",
                    packages="harness=0",
                    failed_phase="",
                )
                out.append((row, outcomes))
    return out


def write_store(root: Path, runs: list[tuple[RunRow, list[TaskOutcome]]]) -> None:
    """Write tables, outcomes, manifests and checksums in the store's format (no fsync: this is test data)."""
    for bench in BENCHMARKS:
        rows = [r for r, _ in runs if r.benchmark == bench]
        folder = root / bench
        (folder / layout.OUTCOMES_DIR).mkdir(parents=True, exist_ok=True)
        (folder / layout.MANIFESTS_DIR).mkdir(parents=True, exist_ok=True)
        data = encode_runs(rows)
        (root / layout.runs_path(bench)).write_bytes(data)
        (root / layout.checksum_path(bench)).write_bytes(encode_checksum([sha256_hex(data)], layout.RUNS_FILE))
    files: dict[str, dict[str, bytes]] = {bench: {} for bench in BENCHMARKS}
    for row, outcomes in runs:
        path = root / layout.outcomes_path(row.benchmark, row.run_id)
        written = {
            layout.outcomes_path(row.benchmark, row.run_id): encode_outcomes(outcomes, str(path)),
            layout.manifest_path(row.benchmark, row.run_id): encode_manifest(Manifest.for_row(row), "manifest"),
        }
        for relpath, content in written.items():
            if not (root / relpath).exists():
                (root / relpath).write_bytes(content)
            files[row.benchmark][layout.in_benchmark(row.benchmark, relpath)] = content
    for bench, contents in files.items():
        (root / layout.file_sums_path(bench)).write_bytes(FileSums().with_files(contents).encode())


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(first call, best of ``repeat``) in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="compare-scale-") as tmp:
        repo = Path(tmp)
        root = repo / "results"
        t0 = time.perf_counter()
        runs = synthetic_runs(args.runs, args.tasks)
        last_commit = runs[-1][0].git_commit
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "user.name", "bench")
        git(repo, "config", "user.email", "bench@example.invalid")
        write_store(root, [r for r in runs if r[0].git_commit != last_commit])
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "results without the last commit")
        write_store(root, runs)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "all results")
        build_s = time.perf_counter() - t0

        store = ResultStore(root)
        tables = [root / layout.runs_path(b) for b in BENCHMARKS]
        rows = store.runs()
        assert len(rows) == len(runs)
        latest = WorktreeSource(root).groups()
        latest_files = [root / layout.outcomes_path(r.benchmark, r.run_id) for g in latest.values() for r in g]
        half = len(rows) // 2
        by_commit = sorted(rows, key=lambda r: (r.git_commit, r.run_id))
        first_ids = [r.run_id for r in by_commit[:half]]
        second_ids = [r.run_id for r in by_commit[half:]]
        all_files = [root / layout.outcomes_path(r.benchmark, r.run_id) for r in rows]

        def pandas_read(paths: list[Path]) -> None:
            for path in paths:
                pd.read_csv(path)

        def compare_revision() -> None:
            result = compare(RevisionSource("HEAD~1", root), WorktreeSource(root))
            assert len(result.pairs) == len(BENCHMARKS) * len(PROFILES)

        def compare_all() -> None:
            result = compare(RunIdsSource(first_ids, root), RunIdsSource(second_ids, root))
            assert sum(len(p.a.run_ids) + len(p.b.run_ids) for p in result.pairs if p.a and p.b) == len(rows)

        scenarios = [
            ("load all runs tables", store.runs, lambda: pandas_read(tables)),
            ("compare HEAD~1 . (latest commits)", compare_revision, lambda: pandas_read(tables * 2 + latest_files * 2)),
            ("compare all runs (500 vs 500)", compare_all, lambda: pandas_read(tables + all_files)),
        ]
        print(
            f"store: {len(rows)} runs x {args.tasks} tasks ({len(all_files)} outcome files), built in {build_s:.1f} s"
        )
        print(f"{'scenario':38} {'ours first':>10} {'ours best':>10} {'pandas best':>12} {'ratio':>7}")
        worst = 0.0
        figures: dict[str, dict[str, float]] = {}
        for name, ours, baseline in scenarios:
            first, best = timed(ours, args.repeat)
            _, base = timed(baseline, args.repeat)
            worst = max(worst, best)
            figures[name] = {"first_s": first, "best_s": best, "pandas_best_s": base}
            print(f"{name:38} {first:10.3f} {best:10.3f} {base:12.3f} {best / base:7.2f}x")
        print(
            f"slowest scenario (best of {args.repeat}): {worst:.3f} s"
            f" -> target < 1 s: {'met' if worst < 1 else 'MISSED'}"
        )
        if args.json:
            args.json.write_text(json.dumps({"runs": len(rows), "slowest_s": worst, "scenarios": figures}, indent=2))


if __name__ == "__main__":
    main()
