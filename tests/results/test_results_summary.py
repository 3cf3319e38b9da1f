"""The run row, the manifest, `harness compare` and the pooled seeds line share one statistics path."""

from __future__ import annotations

import numpy as np
import pytest
from results_factories import make_row

from harness.benchmark.protocol import Episode
from harness.results.compare.compare import compare
from harness.results.stats.estimators import wilson_interval
from harness.results.store.manifest import Manifest, PhasesRecord, PhaseSummary
from harness.results.store.schema import TaskOutcome
from harness.results.store.sources import RunIdsSource
from harness.results.store.store import ResultStore
from harness.run.state import summarize


def _episodes(seed: int, n_tasks: int = 30, samples: int = 4) -> list[Episode]:
    """Several samples per task, correlated within a task, and a few infra errors (one task loses them all)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n_tasks):
        skill = rng.random()
        for s in range(samples):
            infra = (t == 3) or (t % 7 == 0 and s == 1)
            passed = bool(rng.random() < skill) and not infra
            out.append(
                Episode(task_id=f"t{t:03d}", sample=s, passed=passed, reward=float(passed), error_kind="infra" * infra)
            )
    return out


def _record(store: ResultStore, run_id: str, episodes: list[Episode]) -> dict:
    summary = summarize(episodes)
    assert summary.ci is not None
    outcomes = [
        TaskOutcome(
            phase="after", task_id=e.task_id, sample=e.sample, reward=e.reward, passed=e.passed, error_kind=e.error_kind
        )
        for e in episodes
    ]
    row = make_row(
        run_id,
        outcomes,
        pass_after=summary.pass_rate,
        ci_after_low=summary.ci[0],
        ci_after_high=summary.ci[1],
    )
    phases = PhasesRecord(after=PhaseSummary(pass_hat_k=summary.pass_hat_k))
    store.append_run(row, outcomes, Manifest.for_row(row).model_copy(update={"phases": phases}))
    return {"row": row, "summary": summary}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_row_interval_and_pass_hat_k_equal_what_compare_prints(tmp_path, seed: int) -> None:
    store = ResultStore(tmp_path / "results")
    episodes = _episodes(seed)
    recorded = _record(store, "r1", episodes)
    row, summary = recorded["row"], recorded["summary"]
    side = compare(RunIdsSource(["r1"], store.root), RunIdsSource(["r1"], store.root)).pairs[0].a
    assert side is not None and side.ci_method == "wilson-design-effect"
    assert (row.pass_after, row.ci_after_low, row.ci_after_high) == (side.pass_rate, side.ci_low, side.ci_high)
    assert summary.pass_hat_k == side.pass_hat_k and set(side.pass_hat_k) == {1, 2, 3}
    assert summary.infra_errors == side.infra_errors == 4 + 5  # all of t003; sample 1 of t000, t007 ... t028
    # the old pooled-sample Wilson interval was narrower than the task-clustered one
    pooled = wilson_interval(summary.n_passed, summary.n_scored)
    assert pooled[1] - pooled[0] < side.ci_high - side.ci_low


def test_tasks_with_some_infra_samples_stay_in_pass_hat_k() -> None:
    episodes = [
        Episode(task_id="a", sample=0, passed=True),
        Episode(task_id="a", sample=1, error_kind="infra"),
        Episode(task_id="b", sample=0, passed=True),
        Episode(task_id="b", sample=1, passed=False),
    ]
    # a: 1 of 1 scored, b: 1 of 2 -> pass^1 = (1 + 0.5) / 2; k stops at the fewest scored trials (1)
    assert summarize(episodes).pass_hat_k == pytest.approx({1: 0.75})
