"""Spec loading: the real math spec validates in every profile (malformed ones: tests/reliability/)."""

from __future__ import annotations

import copy
import subprocess
import sys

from harness.engines.verl.engine import VerlConfig, to_verl_dict
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


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO)


def test_cli_unknown_benchmark() -> None:
    proc = _cli("run", "mathh")
    assert proc.returncode == 2
    assert "unknown benchmark 'mathh'; did you mean 'math'?" in proc.stderr


def test_cli_validate_all_profiles() -> None:
    proc = _cli("validate", "math")
    assert proc.returncode == 0, proc.stderr
    assert "profile=full" in proc.stdout and "profile=smoke" in proc.stdout


def test_smoke_defaults_say_what_they_show_and_the_text_is_not_hashed() -> None:
    """A default profile that cannot show learning says so (the run prints it last) and names the command that can;
    the text is for the reader, so editing it keeps the hash that the profile's recorded rows carry."""
    for bench in ("math", "tau2", "bfcl"):
        spec = load_spec(REPO / "benchmarks" / bench / "spec.yaml")
        assert f"harness run {bench} --profile" in spec.shows or "--profile learn-h200" in spec.shows, (bench, spec)
        assert spec_hash(spec) == spec_hash(spec.model_copy(update={"shows": "something else"}))
    assert load_spec(REPO / "benchmarks" / "bfcl" / "spec.yaml").model.name == "Qwen2.5-Coder-0.5B-Instruct"
    assert not load_spec(REPO / "benchmarks" / "arith" / "spec.yaml").shows  # it shows learning itself
