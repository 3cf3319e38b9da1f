"""The files an engine and its worker pass (:mod:`harness.engines.jobs`): written by one side, read by the other
as the same model; a newer file is refused, a train-info file from before versions still reads, a triplet of no
version or that is not one is a one-line error naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engines.base import TrainRequest
from harness.engines.jobs import (
    TRAIN_INFO_FILE,
    SimulatorRef,
    TrainInfo,
    Triplet,
    TrlJob,
    UpdateJob,
    VerlJob,
    read_triplets,
    write_triplets,
)
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


def test_triplets_read_back_as_the_engine_wrote_them(tmp_path: Path) -> None:
    triplets = [
        Triplet(prompt_ids=[1, 2, 3], completion_ids=[4, 5], advantage=1.25, rollout=("t1", 0)),
        Triplet(prompt_ids=[1], completion_ids=[6], advantage=-0.5, rollout=("t1", 1)),
    ]
    path = write_triplets(tmp_path / "triplets-step1.jsonl", triplets)
    assert read_triplets(path) == triplets
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {
        "schema_version": 1, "prompt_ids": [1, 2, 3], "completion_ids": [4, 5], "advantage": 1.25, "rollout": ["t1", 0]
    }  # fmt: skip
    assert read_triplets(write_triplets(tmp_path / "none.jsonl", [])) == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"prompt_ids": [1], "completion_ids": [2], "advantage": 1.0, "rollout": ["t", 0]}',
         "triplet: schema_version: missing required key"),
        ('{"schema_version": 2}', "triplet: written by a newer harness (schema_version 2; "),
        ('{"schema_version": 1, "prompt_ids": [1], "completion_ids": [2.5], "advantage": 1.0, "rollout": ["t", 0]}',
         "triplet: completion_ids.0: Input should be a valid integer"),
        ('{"schema_version": 1, "prompt_ids": [1], "completion_ids": [2], "advantage": 1.0}',
         "triplet: rollout: missing required key"),
        ('{"schema_version": 1, "prompt_ids": [1], "compl', "triplet is not JSON"),
    ],
)  # fmt: skip
def test_a_line_that_is_not_a_triplet_is_one_line_naming_the_file_and_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    good = Triplet(prompt_ids=[1], completion_ids=[2], advantage=1.0, rollout=("t", 0)).model_dump_json()
    path = tmp_path / "triplets.jsonl"
    path.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(EngineError) as raised:
        read_triplets(path)
    assert str(raised.value).startswith(f"{path}:3: {problem}") and "\n" not in str(raised.value)
    with pytest.raises(EngineError, match="cannot read triplets"):
        read_triplets(tmp_path / "nowhere.jsonl")
