"""The run plan, without processes: which phases run, are reused or skipped, and which server starts early."""

from __future__ import annotations

import pytest

from harness.run.plan import RunPlan, plan_run


@pytest.mark.parametrize(
    ("eval_only", "skip_baseline", "done", "trained", "expected"),
    [
        # a fresh run: baseline, train, and the baseline's server boots during set-up
        (False, False, [], False, RunPlan("run", "run", "before")),
        (False, True, [], False, RunPlan("skip", "run", None)),
        # evaluation only: the evaluated model's server boots during set-up
        (True, False, [], False, RunPlan("skip", "skip", "after")),
        (True, True, ["baseline"], True, RunPlan("skip", "skip", "after")),
        # resumed after the baseline: it is read back, and no server starts before training (it would sit idle)
        (False, False, ["baseline"], False, RunPlan("reuse", "run", None)),
        # resumed after training: both reused
        (False, False, ["baseline", "train"], True, RunPlan("reuse", "reuse", None)),
        # training finished but its checkpoint is gone: train again
        (False, False, ["baseline", "train"], False, RunPlan("reuse", "run", None)),
        (False, True, ["train"], True, RunPlan("skip", "reuse", None)),
    ],
)
def test_plan(eval_only: bool, skip_baseline: bool, done: list[str], trained: bool, expected: RunPlan) -> None:
    assert plan_run(eval_only=eval_only, skip_baseline=skip_baseline, done=done, trained=trained) == expected


def test_plan_describes_itself_in_one_line() -> None:
    args = {"eval_only": False, "skip_baseline": False, "done": ("baseline",), "trained": False}
    assert plan_run(**args).describe() == "baseline reuse, train run, eval run"
    assert plan_run(**{**args, "eval_only": True, "trained": True}).describe() == "baseline skip, train skip, eval run"
