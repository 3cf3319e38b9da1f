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


@pytest.mark.parametrize(
    ("eval_only", "skip_baseline", "expected"),
    [
        (False, False, RunPlan("run", "run", "before", early_server_waits=True)),
        (True, False, RunPlan("skip", "skip", "after", early_server_waits=True)),
        (False, True, RunPlan("skip", "run", None)),  # no early server, nothing to wait for
    ],
)
def test_with_a_user_simulator_on_the_gpu_the_early_server_waits_for_it(
    eval_only: bool, skip_baseline: bool, expected: RunPlan
) -> None:
    """Two vLLM servers sizing their caches at once on one GPU each count the other's memory as taken: the policy's
    early server starts once the simulator serves. On a CPU, or without a simulator, it starts at once."""
    args = {"eval_only": eval_only, "skip_baseline": skip_baseline, "done": (), "trained": False}
    assert plan_run(**args, simulator_on_gpu=True) == expected
    assert not plan_run(**args, simulator_on_gpu=False).early_server_waits


def test_a_simulator_is_served_here_unless_an_endpoint_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.serving.simulator import SIMULATOR_URL_ENV, serves_simulator
    from harness.spec import load_spec
    from support import MATH_SPEC, TAU2_SPEC

    monkeypatch.delenv(SIMULATOR_URL_ENV, raising=False)
    assert serves_simulator(load_spec(TAU2_SPEC, "h200")) and not serves_simulator(load_spec(MATH_SPEC, "smoke"))
    monkeypatch.setenv(SIMULATOR_URL_ENV, "http://127.0.0.1:9/v1")
    assert not serves_simulator(load_spec(TAU2_SPEC, "h200"))
