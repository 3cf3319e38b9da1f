"""The files an engine and its worker pass (:mod:`harness.engines.jobs`): written by one side, read by the other
as the same model; a newer file is refused, a train-info file from before versions still reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engines.base import TrainRequest
from harness.engines.jobs import TRAIN_INFO_FILE, SimulatorRef, TrainInfo, TrlJob, UpdateJob, VerlJob
from harness.errors import EngineError
from harness.spec import load_spec
from support import copy_math_benchmark


def test_a_job_reads_back_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec_path = copy_math_benchmark(tmp_path / "benchmarks", {})
    request = TrainRequest(
        spec=load_spec(spec_path, "smoke"),
        spec_path=spec_path,
        base_model=tmp_path / "model",
        output_dir=tmp_path / "train",
        seed=3,
        log_path=tmp_path / "train.log",
    )
    monkeypatch.setenv("HARNESS_DATA_MIRROR", str(tmp_path / "mirror"))
    sim = SimulatorRef(base_url="http://127.0.0.1:9/v1", model="user")
    verl = VerlJob.for_request(request, ray_address=None, simulator=sim).write(tmp_path / "verl.json")
    assert VerlJob.read(verl) == VerlJob.for_request(request, simulator=sim)
    assert "ray_address" not in json.loads(verl.read_text())  # None is left out
    monkeypatch.delenv("HARNESS_DATA_MIRROR")
    trl = TrlJob.for_request(request).write(tmp_path / "trl.json")
    job = TrlJob.read(trl)
    assert (job.seed, job.spec_path, job.data_mirror, job.resume_from_checkpoint) == (3, spec_path, None, None)
    update = UpdateJob(
        checkpoint=tmp_path,
        triplets=tmp_path / "t.jsonl",
        output_dir=tmp_path,
        learning_rate=1e-6,
        max_grad_norm=1,
        seed=0,
    )
    assert UpdateJob.read(update.write(tmp_path / "update.json")) == update


def test_a_newer_or_foreign_job_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(EngineError, match="job file: written by a newer harness"):
        UpdateJob.read(path)
    path.write_text(json.dumps({"schema_version": 1, "checkpoint": "x"}))
    with pytest.raises(EngineError, match=r"job file: triplets: missing required key \(and 4 more\)"):
        UpdateJob.read(path)


def test_train_info_from_before_versions_still_reads(tmp_path: Path) -> None:
    (tmp_path / TRAIN_INFO_FILE).write_text('{"engine": "trl-grpo", "steps": 2, "seed": 0, "precision": "float32"}\n')
    assert TrainInfo.read(tmp_path).precision == "float32"
    TrainInfo(engine="verl", steps=1, seed=0, verl_checkpoint="global_step_1").write(tmp_path)
    written = json.loads((tmp_path / TRAIN_INFO_FILE).read_text())
    assert written == {"schema_version": 1, "engine": "verl", "steps": 1, "seed": 0, "verl_checkpoint": "global_step_1"}
    with pytest.raises(EngineError, match="cannot read train info"):
        TrainInfo.read(tmp_path / "nowhere")
