"""The skeleton every one-worker engine shares (:class:`harness.engines.base.WorkerEngine`), run for real on the
local backend with a stand-in worker module: the job written where the worker reads it, its progress records
relayed (a line that is not one stops it), the checkpoint required, the steps read from ``harness-train.json``, and
what an engine overrides (a resume) reaching the result."""

from __future__ import annotations

import json
import os
import re
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from harness.engines.base import JOB_FILE, TrainRequest, WorkerEngine
from harness.engines.jobs import TrlJob
from harness.engines.progress import ProgressRecord
from harness.engines.trl.engine import TrlGrpoEngine
from harness.errors import EngineError
from harness.spec import load_spec
from support import MATH_SPEC, REPO

STANDIN = """
    import json
    import sys
    from pathlib import Path

    from harness.engines.jobs import TrainInfo, TrlJob
    from harness.engines.progress import PROGRESS_PREFIX, ProgressRecord, progress_line

    job = TrlJob.read(Path(sys.argv[1]))
    if job.seed == 13:
        sys.exit(4)
    if job.seed in BAD_LINES:  # a record of no version, of a newer one, a wrong value, not JSON
        print(PROGRESS_PREFIX + BAD_LINES[job.seed], flush=True)
    for step in (1, 2):
        print(progress_line(ProgressRecord(step=step, loss=0.5 / step, metrics={"kl": 0.1})), flush=True)
    if job.seed != 11:  # 11: no checkpoint
        checkpoint = job.output_dir / "checkpoint"
        checkpoint.mkdir(parents=True)
        (checkpoint / "config.json").write_text("{}")
        TrainInfo(engine="standin", steps=7, seed=job.seed).write(checkpoint)
"""


BAD_LINES = {
    21: '{"step": 1, "loss": 0.5}',
    22: '{"schema_version": 2, "step": 1}',
    23: '{"schema_version": 1, "step": 1, "loss": "low"}',
    24: '{"schema_version": 1, "step": 1, "los',
}


class StandinEngine(WorkerEngine[TrlJob]):
    name: ClassVar[str] = "standin"
    worker: ClassVar[str] = "standin_worker"

    def job(self, request: TrainRequest) -> TrlJob:
        return TrlJob.for_request(request, resume_from_checkpoint=request.resume_from)

    def total_steps(self, request: TrainRequest) -> int | None:
        return 2

    def resumed_from_step(self, job: TrlJob) -> int:
        return 5 if job.resume_from_checkpoint else 0


def request_for(tmp_path: Path, seed: int, progress: list[tuple[int, int]]) -> TrainRequest:
    return TrainRequest(
        spec=load_spec(MATH_SPEC, "smoke"),
        spec_path=MATH_SPEC,
        base_model=tmp_path / "model",
        output_dir=tmp_path / f"train-{seed}",
        seed=seed,
        log_path=tmp_path / f"train-{seed}.log",
        on_progress=lambda step, total, _record: progress.append((step, total)),
        resume_from=tmp_path / "earlier",
    )


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "standin"
    folder.mkdir()
    (folder / "standin_worker.py").write_text(f"BAD_LINES = {BAD_LINES!r}\n" + textwrap.dedent(STANDIN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(REPO)]))


@pytest.mark.usefixtures("standin")
def test_the_skeleton_runs_the_worker_and_reads_what_it_wrote(tmp_path: Path) -> None:
    progress: list[tuple[int, int]] = []
    request = request_for(tmp_path, 3, progress)
    result = StandinEngine().train(request)
    assert TrlJob.read(request.output_dir / JOB_FILE).resume_from_checkpoint == tmp_path / "earlier"
    assert result.checkpoint == request.output_dir / "checkpoint"
    assert result.steps == 7  # harness-train.json, not the count of progress records
    assert result.metrics == [
        ProgressRecord(step=1, loss=0.5, metrics={"kl": 0.1}),
        ProgressRecord(step=2, loss=0.25, metrics={"kl": 0.1}),
    ]
    assert [r.flat() for r in result.metrics] == [
        {"step": 1.0, "kl": 0.1, "loss": 0.5},
        {"step": 2.0, "kl": 0.1, "loss": 0.25},
    ]
    assert progress == [(1, 2), (2, 2)]
    assert result.resumed_from_step == 5 and result.wall_s > 0


@pytest.mark.usefixtures("standin")
def test_a_failed_worker_or_a_missing_checkpoint_is_one_line_naming_the_log(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"standin training failed: the trainer exited with code 4.*train-13\.log"):
        StandinEngine().train(request_for(tmp_path, 13, []))
    with pytest.raises(EngineError, match=r"standin training wrote no checkpoint at .*checkpoint; see .*train-11\.log"):
        StandinEngine().train(request_for(tmp_path, 11, []))


@pytest.mark.usefixtures("standin")
@pytest.mark.parametrize(
    ("seed", "problem"),
    [
        (21, r"progress record: schema_version: missing required key"),
        (22, r"progress record: written by a newer harness \(schema_version 2; .*\); update the harness"),
        (23, r"progress record: loss: Input should be a valid number, unable to parse string as a number"),
        (24, r"progress record is not JSON: '\{\"schema_version\": 1, \"step\": 1, \"los'"),
    ],
)
def test_a_progress_line_that_is_not_a_record_is_one_line_naming_the_log(
    tmp_path: Path, seed: int, problem: str
) -> None:
    progress: list[tuple[int, int]] = []
    with pytest.raises(EngineError) as raised:
        StandinEngine().train(request_for(tmp_path, seed, progress))
    message = str(raised.value)
    assert "\n" not in message and re.fullmatch(rf"standin training \(.*train-{seed}\.log\): {problem}", message)
    assert progress == []  # nothing relayed past the bad line


def test_trl_resumes_from_the_newest_complete_trainer_checkpoint(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier" / "trainer"
    for step, complete in ((1, True), (2, True), (3, False)):
        saved = earlier / f"checkpoint-{step}"
        saved.mkdir(parents=True)
        for name in ("optimizer.pt", "scheduler.pt", "config.json"):
            (saved / name).write_text("x")
        if complete:
            (saved / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    engine = TrlGrpoEngine()
    job = engine.job(request_for(tmp_path, 0, []))
    assert job.resume_from_checkpoint == earlier / "checkpoint-2"
    assert engine.resumed_from_step(job) == 2
    fresh = engine.job(replace(request_for(tmp_path, 0, []), resume_from=None))
    assert fresh.resume_from_checkpoint is None and engine.resumed_from_step(fresh) == 0
