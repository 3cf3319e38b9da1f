"""The verl engine's TensorBoard wiring, as far as it runs without VERL (not installed on a CPU machine).

* The spec -> VERL translation (:func:`harness.engines.verl.engine.verl_run_config`): ``tensorboard`` joins VERL's
  ``trainer.logger`` once, after the spec's own loggers and the file logger, whatever the spec or its overrides
  list, and ``TENSORBOARD_DIR`` (the folder VERL's TensorBoard logger writes to) goes to the Ray workers' environment.
* The real path from the engine to VERL: ``VerlEngine.train`` writes the job, the local backend starts the real
  worker (``harness.engines.verl.worker``), which writes the data files and composes VERL's configuration. VERL's
  entry point (``verl.trainer.main_ppo.main``) and the Hydra/OmegaConf calls before it are stand-ins here that only
  record what they are handed and stop the worker: the test checks that VERL would get the ``tensorboard`` logger
  and ``artifacts/runs/<id>/train/tensorboard`` in both the worker's and the Ray workers' environment.
* The manifest names that folder (``engine.tensorboard``) once event files are in it, and TensorBoard's own reader
  reads the curves from there.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.engines.base import TrainRequest
from harness.engines.verl.engine import VerlConfig, VerlEngine, verl_run_config
from harness.errors import HarnessError
from harness.spec import load_spec
from support import MATH_SPEC, REPO

sys.path.insert(0, str(Path(__file__).parent / "results"))
from results_factories import make_row

TAU2_SPEC = REPO / "benchmarks" / "tau2" / "spec.yaml"
RUN_ARGS: dict[str, Any] = {
    "model_path": "/models/base",
    "train_file": "/data/train.parquet",
    "val_file": "/data/val.parquet",
    "output_dir": Path("/runs/r1/train"),
    "agent_loop_config": "/runs/r1/train/agent-loops.yaml",
    "seed": 3,
    "ray_address": None,
}
BOARD = Path("/runs/r1/train/tensorboard")


def _config(spec_path: Path, profile: str, **trainer: Any) -> VerlConfig:
    raw = copy.deepcopy(load_spec(spec_path, profile).training.config)
    raw.setdefault("trainer", {}).update(trainer)
    return VerlConfig.model_validate(raw)


@pytest.mark.parametrize(
    ("spec_path", "profile"), [(MATH_SPEC, "full"), (MATH_SPEC, "smoke-verl"), (TAU2_SPEC, "full")]
)
def test_every_verl_profile_gets_tensorboard_and_its_folder(spec_path: Path, profile: str) -> None:
    config = _config(spec_path, profile)
    own = list(config.trainer.logger)
    assert "tensorboard" not in own  # the profiles leave it to the harness
    run = verl_run_config(config, env_vars={"HARNESS_X": "1"}, tensorboard_dir=BOARD, **RUN_ARGS)
    assert run["trainer"]["logger"] == [*own, "file", "tensorboard"]
    assert run["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"] == {"HARNESS_X": "1", "TENSORBOARD_DIR": str(BOARD)}


@pytest.mark.parametrize(
    ("spec_loggers", "override", "expected"),
    [
        (["console", "tensorboard"], None, ["console", "tensorboard", "file"]),  # listed by the spec: kept, once
        (["console"], ["wandb"], ["wandb", "file", "tensorboard"]),  # an override replaces the list, not ours
        (["file"], None, ["file", "tensorboard"]),
    ],
)
def test_tensorboard_is_listed_once_whatever_the_spec_lists(
    spec_loggers: list[str], override: list[str] | None, expected: list[str]
) -> None:
    config = _config(MATH_SPEC, "full", logger=spec_loggers)
    if override is not None:
        config = config.model_copy(update={"overrides": {"trainer.logger": override}})
    run = verl_run_config(config, tensorboard_dir=BOARD, **RUN_ARGS)
    assert run["trainer"]["logger"] == expected
    assert run["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["TENSORBOARD_DIR"] == str(BOARD)


def test_without_a_folder_there_is_no_tensorboard_logger() -> None:
    """Where the tensorboard package is missing, the worker passes no folder: VERL must not be asked for a logger
    it cannot start."""
    env_vars = {"HARNESS_X": "1"}
    run = verl_run_config(_config(MATH_SPEC, "full"), env_vars=env_vars, **RUN_ARGS)
    assert run["trainer"]["logger"] == ["console", "file"]
    assert run["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"] == {"HARNESS_X": "1"}
    assert env_vars == {"HARNESS_X": "1"}  # the caller's dictionary is left as it was


# Stand-ins for what VERL's worker imports and calls before VERL trains: they record what VERL would be handed
# (the merged configuration, the worker's own TENSORBOARD_DIR, whether VERL's config check ran) and stop the worker.
STANDINS = {
    "hydra/__init__.py": """
        import contextlib

        @contextlib.contextmanager
        def initialize_config_dir(config_dir, version_base=None):
            yield

        def compose(config_name):
            return {}
    """,
    "omegaconf/__init__.py": """
        class OmegaConf:
            @staticmethod
            def set_struct(cfg, value):
                pass

            @staticmethod
            def create(value):
                return value

            @staticmethod
            def merge(base, update):
                return {**base, **update}
    """,
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/trainer/ppo/__init__.py": "",
    "verl/trainer/ppo/utils.py": """
        def need_critic(cfg):
            return cfg["algorithm"]["adv_estimator"] == "gae"

        def need_reference_policy(cfg):
            return cfg["actor_rollout_ref"]["actor"]["use_kl_loss"]
    """,
    "verl/utils/__init__.py": "",
    "verl/utils/config.py": """
        import os

        def validate_config(config, use_reference_policy, use_critic):
            os.environ["VERL_STANDIN_CHECKED"] = f"{use_reference_policy} {use_critic}"
    """,
    "verl/trainer/main_ppo.py": """
        import json
        import os
        import sys

        def main(cfg):
            record = {
                "cfg": cfg,
                "TENSORBOARD_DIR": os.environ.get("TENSORBOARD_DIR"),
                "checked": os.environ.get("VERL_STANDIN_CHECKED"),
            }
            with open(os.environ["VERL_STANDIN_RECORD"], "w") as f:
                json.dump(record, f)
            sys.exit(3)
    """,
}


def test_the_worker_hands_verl_the_run_folders_tensorboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    standins = tmp_path / "standins"
    for name, text in STANDINS.items():
        (standins / name).parent.mkdir(parents=True, exist_ok=True)
        (standins / name).write_text(textwrap.dedent(text))
    record = tmp_path / "verl-call.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(standins), str(REPO)]))
    monkeypatch.setenv("VERL_STANDIN_RECORD", str(record))
    monkeypatch.delenv("TENSORBOARD_DIR", raising=False)
    run_dir = tmp_path / "artifacts" / "runs" / "math-r1"
    request = TrainRequest(
        spec=load_spec(MATH_SPEC, "smoke-verl"),
        spec_path=MATH_SPEC,
        base_model=tmp_path / "base-model",
        output_dir=run_dir / "train",  # as the runner asks: the run folder's train/
        seed=5,
        log_path=run_dir / "train.log",
        ray_address="127.0.0.1:6379",  # a cluster is named, so no local GPU is needed (the stand-in never joins it)
    )
    with pytest.raises(HarnessError, match="verl training failed"):
        VerlEngine().train(request)
    assert record.is_file(), (run_dir / "train.log").read_text()[-3000:]
    handed = json.loads(record.read_text())
    board = run_dir / "train" / "tensorboard"
    cfg = handed["cfg"]
    assert cfg["trainer"]["logger"] == ["console", "file", "tensorboard"]
    assert cfg["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["TENSORBOARD_DIR"] == str(board)  # Ray workers
    assert handed["TENSORBOARD_DIR"] == str(board)  # and the driver
    assert handed["checked"] == "False False"  # VERL's own check ran first: no reference policy, no critic
    # the configuration the worker keeps beside the run is what VERL was handed
    assert json.loads((run_dir / "train" / "verl-config.json").read_text()) == cfg
    assert cfg["trainer"]["experiment_name"] == "math-r1"  # the run's id names the experiment in VERL
    # the data files it wrote: validation rows are marked, so their rollouts never count as a training group
    import pandas as pd

    for name, validation in (("train", False), ("val", True)):
        rows = pd.read_parquet(run_dir / "train" / "data" / f"{name}.parquet").to_dict("records")
        assert rows and {r["extra_info"]["validation"] for r in rows} == {validation}


def test_the_manifest_names_the_folder_that_holds_the_curves(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from harness.results.store.manifest import BackendRecord
    from harness.run.record import RecordContext, build_manifest
    from harness.run.state import RunState
    from harness.spec.options import RunOptions

    spec = load_spec(MATH_SPEC, "smoke-verl")
    run_dir = tmp_path / "runs" / "math-r1"
    run_dir.mkdir(parents=True)
    ctx = RecordContext(
        spec=spec,
        spec_path=MATH_SPEC,
        options=RunOptions(benchmark="math", profile="smoke-verl"),
        resolved=RunOptions(benchmark="math", profile="smoke-verl", seed=0),
        backend=BackendRecord(name="local"),
        serving=None,
        resources=None,
    )

    def named() -> str:
        state = RunState(run_id="math-r1", run_dir=run_dir, started_at="", git=("c" * 40, False))
        return str(build_manifest(state, ctx, make_row("math-r1"), {}).engine.tensorboard)

    assert named() == ""  # no curves (an evaluation-only run, or no tensorboard package): nothing named
    # VERL's TensorBoard logger writes its scalars with torch's SummaryWriter into TENSORBOARD_DIR
    writer = SummaryWriter(str(run_dir / "train" / "tensorboard"))
    for step, reward in ((1, 0.25), (2, 0.5)):
        writer.add_scalar("critic/score/mean", reward, step)
    writer.close()
    assert named() == "train/tensorboard"
    curves = EventAccumulator(str(run_dir / named()))
    curves.Reload()
    assert [(e.step, e.value) for e in curves.Scalars("critic/score/mean")] == [(1, 0.25), (2, 0.5)]
