"""`harness run BENCH --seeds N` through the CLI: N real runs (one row per seed, distinct seeds, one group id shared
by the N rows and by no other run) and the pooled line printed at the end, checked against the rows' own outcomes.

The cheapest real run: the arith benchmark (no tools), evaluation only, three tasks, on the smoke model served by
vLLM on the CPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.results.stats.estimators import pass_rate
from harness.results.store.store import ResultStore
from support import REPO

pytestmark = pytest.mark.slow

POOLED = re.compile(
    r"^(\d+) seeds, (before|after): pooled pass@1 ([\d.]+)% \[([\d.]+)%, ([\d.]+)%\] over (\d+) tasks$", re.M
)


def test_seeds_run_one_row_per_seed_in_one_group_and_print_the_pooled_line(smoke_model: Path, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        PYTHONPATH=str(REPO),
    )
    args = ["run", "arith", "--eval-only", "--limit", "3", "--seeds", "2", "--backend", "local"]
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    store = ResultStore(tmp_path / "results")
    rows = store.runs("arith")
    assert len(rows) == 2  # one row per seed
    assert [r.seed for r in rows] == [0, 1]  # the spec's seed list ([0]), then the next unused seed
    assert all(r.status == "complete" and r.n_tasks == 3 for r in rows)
    assert len({r.run_id for r in rows}) == 2
    group = rows[0].group_id
    assert re.fullmatch(r"arith-[0-9a-f]{8}", group) and all(r.group_id == group for r in rows)
    assert group not in {r.run_id for r in rows}  # a single run's group is its own run id; this one is shared
    # each run's header line names its own seed, in order
    assert re.findall(r"^run (\S+) .* seed=(\d+) ", proc.stdout, re.M) == [(r.run_id, str(r.seed)) for r in rows]

    # the pooled line: once, after both runs, for the phase that ran (evaluation only: no "before")
    pooled = POOLED.findall(proc.stdout)
    assert len(pooled) == 1, proc.stdout[-3000:]
    n_seeds, phase, rate, low, high, n_tasks = pooled[0]
    assert (n_seeds, phase, n_tasks) == ("2", "after", "3")
    assert proc.stdout.rstrip().endswith(f"over {n_tasks} tasks")
    # the same figures from the two rows' recorded outcomes, counted here by task (two samples per task)
    passed: dict[str, list[bool]] = {}
    for row in rows:
        outcomes = store.outcomes("arith", row.run_id)
        assert {o.phase for o in outcomes} == {"after"} and len(outcomes) == 3
        for o in outcomes:
            passed.setdefault(o.task_id, []).append(o.passed)
    assert all(len(v) == 2 for v in passed.values()) and len(passed) == 3
    successes = np.array([sum(v) for v in passed.values()], dtype=float)
    trials = np.array([len(v) for v in passed.values()], dtype=float)
    mean_of_tasks = float(np.mean(successes / trials))
    assert float(rate) == pytest.approx(100 * mean_of_tasks, abs=0.05)
    expected = pass_rate(successes, trials, 0.95)  # the clustered interval over tasks, as `harness compare` has it
    assert (float(low), float(high)) == pytest.approx((100 * expected.low, 100 * expected.high), abs=0.05)
    assert float(low) <= float(rate) <= float(high)
