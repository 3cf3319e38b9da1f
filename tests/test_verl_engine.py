"""The verl engine on CPU: spec -> VERL config, Ray addressing, step metrics, and the traced rollout.

The rollout tests run the benchmark's real Agent Framework agent with the real MCP calculator and the smoke
model's real tokenizer and chat template; what produces the tokens is either the real model (transformers on CPU)
or, where a test needs a tool call the 135M model will not reliably make, fixed token ids the test chooses.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from harness.benchmark.protocol import Task
from harness.engines.progress import ProgressRecord
from harness.engines.verl.engine import VerlConfig, VerlEngine, resolve_ray_address, to_verl_dict, verl_run_config
from harness.engines.verl.rollout import NoTrainableTokens, Trajectory, traced_rollout
from harness.engines.verl.worker import step_record
from harness.errors import HarnessError
from harness.rollout.loading import open_benchmark
from harness.rollout.toolcalls import parse_hermes
from harness.spec import load_spec
from support import BFCL_SPEC, MATH_SPEC

RUN_ARGS: dict[str, Any] = {
    "model_path": "/models/base",
    "train_file": "/data/train.parquet",
    "val_file": "/data/val.parquet",
    "output_dir": Path("/runs/r1/train"),
    "agent_loop_config": "/runs/r1/train/agent-loops.yaml",
    "seed": 3,
}


def _full_config(**changes: Any) -> VerlConfig:
    raw = copy.deepcopy(load_spec(MATH_SPEC, "full").training.config)
    for dotted, value in changes.items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return VerlConfig.model_validate(raw)


def test_run_config_carries_the_seed_keys_and_the_harness_keys() -> None:
    config = _full_config()
    run = verl_run_config(config, ray_address=None, **RUN_ARGS)
    seed_keys = to_verl_dict(config, RUN_ARGS["model_path"])

    def contains(big: dict[str, Any], small: dict[str, Any]) -> bool:
        return all(contains(big[k], v) if isinstance(v, dict) else (k in big and big[k] == v) for k, v in small.items())

    assert seed_keys["trainer"].pop("logger") == ["console"]
    assert contains(run, seed_keys)  # every other seed value reaches VERL unchanged
    assert run["actor_rollout_ref"]["model"]["path"] == "/models/base"
    assert run["actor_rollout_ref"]["rollout"]["agent"] == {
        "num_workers": 2,
        "default_agent_loop": "harness_agent",
        "agent_loop_config_path": "/runs/r1/train/agent-loops.yaml",
    }
    assert run["data"]["train_files"] == "/data/train.parquet"
    assert run["data"]["val_files"] == "/data/val.parquet"
    assert run["trainer"]["logger"] == ["console", "file"]  # the seed's console logger, plus the metrics file
    assert run["trainer"]["default_local_dir"] == "/runs/r1/train/verl-checkpoints"
    assert run["trainer"]["save_freq"] > 0  # the last step is always saved
    assert run["ray_kwargs"]["ray_init"]["address"] == "local"


def test_gpu_layout_reaches_verl() -> None:
    """n_gpus_per_node, nnodes and the rollout's tensor parallelism (the two-GPU and multi-node runs)."""
    config = _full_config(
        **{
            "trainer.n_gpus_per_node": 2,
            "trainer.nnodes": 2,
            "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
        }
    )
    run = verl_run_config(config, ray_address="10.0.0.5:6379", **RUN_ARGS)
    assert run["trainer"]["n_gpus_per_node"] == 2
    assert run["trainer"]["nnodes"] == 2
    assert run["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"] == 2
    assert run["ray_kwargs"]["ray_init"]["address"] == "10.0.0.5:6379"
    with pytest.raises(ValueError, match="n_gpus_per_node"):
        _full_config(**{"trainer.n_gpus_per_node": 0})


def test_spec_overrides_win_and_no_validation_split_turns_validation_off() -> None:
    config = _full_config(overrides={"trainer.save_freq": 2, "trainer.logger": ["console"]})
    run = verl_run_config(config, ray_address=None, **{**RUN_ARGS, "val_file": None})
    assert run["trainer"]["save_freq"] == 2
    assert run["trainer"]["logger"] == ["console", "file"]
    assert run["trainer"]["val_before_train"] is False
    assert run["trainer"]["test_freq"] == -1


def test_smoke_verl_profile_is_a_valid_scaled_down_seed() -> None:
    spec = load_spec(MATH_SPEC, "smoke-verl")
    assert spec.training.engine == "verl"
    assert spec.model.name == "SmolLM2-135M-Instruct"
    config = VerlConfig.model_validate(spec.training.config)
    out = to_verl_dict(config)
    assert out["algorithm"] == {"adv_estimator": "grpo"}
    assert out["actor_rollout_ref"]["actor"]["clip_ratio_high"] == 0.3  # seed values it does not change stay
    assert out["trainer"]["total_training_steps"] == 2
    assert "shaping" not in out and "train_limit" not in out


@pytest.mark.parametrize("profile", ["learn-h200", "smoke-verl"])
def test_a_profile_setting_a_few_keys_gets_the_listed_defaults_not_verls(profile: str) -> None:
    """BFCL's verl profiles set only the keys they change: the rest must be the defaults ``harness engines verl``
    lists (the reference recipe's), not VERL's own, which train with GAE and a critic on 8 GPUs with 2-way tensor
    parallelism and fail on one GPU."""
    config = VerlConfig.model_validate(load_spec(BFCL_SPEC, profile).training.config)
    run = verl_run_config(config, ray_address=None, **{**RUN_ARGS, "val_file": None})
    assert run["algorithm"] == {"adv_estimator": "grpo"}
    assert (run["trainer"]["n_gpus_per_node"], run["trainer"]["nnodes"]) == (1, 1)
    rollout = run["actor_rollout_ref"]["rollout"]
    assert (rollout["name"], rollout["tensor_model_parallel_size"]) == ("vllm", 1)
    assert run["actor_rollout_ref"]["actor"]["use_kl_loss"] is False
    assert run["actor_rollout_ref"]["ref"]["fsdp_config"] == {"param_offload": False}
    assert run["actor_rollout_ref"]["model"]["path"] == RUN_ARGS["model_path"]


def test_ray_address_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_ray_address(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    assert resolve_ray_address(None) == "head:6379"
    assert resolve_ray_address("other:6379") == "other:6379"


def test_engine_without_gpus_or_cluster_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from harness.engines.base import TrainRequest

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = load_spec(MATH_SPEC, "smoke-verl")
    request = TrainRequest(
        spec=spec, spec_path=MATH_SPEC, base_model=tmp_path, output_dir=tmp_path / "t", seed=0, log_path=tmp_path / "l"
    )
    with pytest.raises(HarnessError, match="needs CUDA GPUs") as raised:
        VerlEngine().train(request)
    assert raised.value.exit_code == 2  # the machine does not fit the profile: a user error, not a crash


def _with_training(spec: Any, **changes: Any) -> Any:
    raw = copy.deepcopy(spec.training.config)
    for dotted, value in changes.items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return spec.model_copy(update={"training": spec.training.model_copy(update={"config": raw})})


def test_a_profile_that_would_train_a_critic_is_refused_before_anything_starts() -> None:
    from harness.engines import check_engine
    from harness.errors import SpecError

    spec, bench, _ = open_benchmark("math", "smoke-verl")
    check_engine(spec, bench)  # GRPO: no critic
    with pytest.raises(SpecError, match="adv_estimator: gae trains a critic"):
        check_engine(_with_training(spec, **{"algorithm.adv_estimator": "gae"}), bench)


def test_a_profile_wanting_more_gpus_than_the_machine_has_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where VERL would wait for GPUs the machine lacks and then fail inside Ray, the engine says it in one line."""
    import torch

    from harness.engines.base import TrainRequest

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    spec = load_spec(BFCL_SPEC, "smoke-verl")

    def request(spec: Any) -> TrainRequest:
        return TrainRequest(
            spec=spec, spec_path=BFCL_SPEC, base_model=tmp_path, output_dir=tmp_path / "t", seed=0,
            log_path=tmp_path / "l",
        )  # fmt: skip

    assert VerlEngine().job(request(spec)).ray_address is None  # 1 GPU wanted (the listed default), 1 there
    wanting_two = _with_training(spec, **{"trainer.n_gpus_per_node": 2})
    with pytest.raises(HarnessError, match=r"trains on 2 GPUs .* this machine has 1") as raised:
        VerlEngine().job(request(wanting_two))
    assert raised.value.exit_code == 2


def test_the_progress_counts_to_verls_own_step_count(tmp_path: Path) -> None:
    """VERL trains epochs x whole batches of the training tasks (it drops a partial last batch), or
    ``trainer.total_training_steps`` where a profile sets it: the bar's total, not 0."""
    from harness.engines.base import TrainRequest

    spec = load_spec(BFCL_SPEC, "learn-h200")  # batch 8, 1 epoch

    def steps(spec: Any, tasks: int) -> int | None:
        request = TrainRequest(
            spec=spec, spec_path=BFCL_SPEC, base_model=tmp_path, output_dir=tmp_path / "t", seed=0,
            log_path=tmp_path / "l", tasks=[Task(id=f"t{i}", prompt="p", answer="a") for i in range(tasks)],
        )  # fmt: skip
        return VerlEngine().total_steps(request)

    assert steps(spec, 140) == 17  # the 140 training tasks of simple_python: 17 steps, as the GPU run logged
    assert steps(_with_training(spec, **{"trainer.total_epochs": 2}), 140) == 34
    assert steps(_with_training(spec, train_limit=20), 140) == 2
    assert steps(_with_training(spec, overrides={"trainer.total_training_steps": 5}), 140) == 5
    assert steps(spec, 7) is None  # not one whole batch: unknown, no bar total


def test_step_record_summarises_verl_metrics() -> None:
    data = {
        "critic/score/mean": 0.25,
        "response_length/mean": 117.5,
        "timing_s/step": 4.0,
        "perf/total_num_tokens": 6000,
        "perf/throughput": 1500.0,
        "val-core/math/acc/mean@1": 0.5,
        "val-aux/math/reward/mean@1": 0.1,
    }
    record = step_record(2, data)
    assert record == ProgressRecord(
        step=2,
        reward_mean=0.25,
        response_length_mean=117.5,
        step_time_s=4.0,
        tokens_total=6000.0,
        tokens_per_s_per_gpu=1500.0,
        val_pass_rate=0.5,
        tokens_per_s=1500.0,
    )
    assert record.flat() == {
        "step": 2.0,
        "reward_mean": 0.25,
        "response_length_mean": 117.5,
        "step_time_s": 4.0,
        "tokens_total": 6000.0,
        "tokens_per_s_per_gpu": 1500.0,
        "val_pass_rate": 0.5,
        "tokens_per_s": 1500.0,
    }
    assert step_record(0, {"val-core/math/acc/mean@1": 0.0}) == ProgressRecord(step=0, val_pass_rate=0.0)


def test_parse_hermes_tool_calls() -> None:
    text = 'Let me compute.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "2*21"}}\n</tool_call>'
    content, calls = parse_hermes(text)
    assert content == "Let me compute."
    assert [(c["name"], c["arguments"]) for c in calls] == [("calculate", {"expression": "2*21"})]
    assert parse_hermes("<tool_call>not json</tool_call> ### 4") == ("<tool_call>not json</tool_call> ### 4", [])


@pytest.fixture(scope="module")
def tokenizer(smoke_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smoke_model)


def test_trace_of_a_tool_using_episode(tokenizer: Any) -> None:
    """Two LLM calls around a real calculator call: generated tokens trained, the tool's tokens masked, and the
    trace identical to the chat template's rendering of the conversation the policy saw."""
    _, bench, _ = open_benchmark("math", "smoke-verl")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns = ['<tool_call>\n{"name": "calculate", "arguments": {"expression": "17*23"}}\n</tool_call>', "### 391"]
    prompts: list[list[int]] = []

    async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float]]:
        prompts.append(list(prompt_ids))
        ids = tokenizer(turns[len(prompts) - 1], add_special_tokens=False)["input_ids"] + [end]
        assert params["max_tokens"] <= 512 and params["temperature"] == 1.0
        return ids, [-0.5] * len(ids)

    async def run() -> Any:
        trajectory = Trajectory(tokenizer, generate, {"temperature": 1.0}, 512)
        async with bench.resources() as resources:
            task = Task(id="t", prompt="What is 17 times 23?", answer="391")
            return await traced_rollout(bench, task, trajectory, max_turns=5, seed=0, resources=resources)

    result = asyncio.run(run())
    trajectory = result.trajectory
    assert result.passed and result.reward == 1.0 and not result.error
    assert [c.tool_calls for c in trajectory.calls] == [1, 0]
    tool_message = trajectory.messages[3]
    assert tool_message["role"] == "tool" and tool_message["content"] == "391"  # the real calculator answered
    # mask: first generation (1), the tool response and next prompt (0), second generation (1)
    runs: list[tuple[int, int]] = []
    for m in trajectory.response_mask:
        if runs and runs[-1][0] == m:
            runs[-1] = (m, runs[-1][1] + 1)
        else:
            runs.append((m, 1))
    assert [m for m, _ in runs] == [1, 0, 1]
    assert runs[0][1] == len(tokenizer(turns[0], add_special_tokens=False)["input_ids"]) + 1
    # each call saw exactly the trace so far, and the trace is the template's rendering of the conversation
    full = trajectory.prompt_ids + trajectory.response_ids
    assert prompts[1] == full[: len(prompts[1])]
    rendered = tokenizer.apply_chat_template(trajectory.messages, tools=trajectory.tools, tokenize=False)
    assert tokenizer.decode(full) == rendered.rstrip("\n")
    assert trajectory.logprobs_complete
    assert [lp for lp, m in zip(trajectory.response_logprobs, trajectory.response_mask, strict=True) if m] == [
        -0.5
    ] * sum(trajectory.response_mask)


@pytest.mark.parametrize("json_tool_calls", [True, False])
def test_a_fenced_json_call_is_a_call_when_the_spec_says_so(tokenizer: Any, json_tool_calls: bool) -> None:
    """serving.json_tool_calls in training: the policy's reply that is only a fenced JSON call runs the real
    calculator (its tokens trained as generated); without the option it is the final answer, and scores 0."""
    _, bench, _ = open_benchmark("math", "smoke-verl")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns = ['```json\n{"name": "calculate", "arguments": {"expression": "17*23"}}\n```', "### 391"]
    calls: list[int] = []

    async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float]]:
        calls.append(len(prompt_ids))
        ids = tokenizer(turns[len(calls) - 1], add_special_tokens=False)["input_ids"] + [end]
        return ids, [-0.5] * len(ids)

    async def run() -> Any:
        trajectory = Trajectory(tokenizer, generate, {"temperature": 1.0}, 512, json_tool_calls=json_tool_calls)
        async with bench.resources() as resources:
            task = Task(id="t", prompt="What is 17 times 23?", answer="391")
            return await traced_rollout(bench, task, trajectory, max_turns=5, seed=0, resources=resources)

    result = asyncio.run(run())
    if json_tool_calls:
        assert result.passed and [c.tool_calls for c in result.trajectory.calls] == [1, 0]
        assert result.trajectory.messages[3] == {**result.trajectory.messages[3], "role": "tool", "content": "391"}
        first = tokenizer(turns[0], add_special_tokens=False)["input_ids"] + [end]
        assert result.trajectory.response_ids[: len(first)] == first  # trained on what it generated
    else:
        assert not result.passed and len(calls) == 1


@pytest.mark.parametrize(("cap", "first"), [(None, 512), (128, 128), (4096, 512)])
def test_each_reply_is_capped_as_in_evaluation(tokenizer: Any, cap: int | None, first: int) -> None:
    """A training reply asks for at most the evaluation's max_tokens (and never more than the budget left), so one
    long reply cannot take a whole conversation's budget; without a cap a reply may take what is left."""
    _, bench, _ = open_benchmark("math", "smoke-verl")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns = ['<tool_call>\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n</tool_call>', "### 4"]
    seen: list[int] = []

    async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float]]:
        seen.append(int(params["max_tokens"]))
        ids = tokenizer(turns[len(seen) - 1], add_special_tokens=False)["input_ids"] + [end]
        return ids, [-0.5] * len(ids)

    async def run() -> Any:
        trajectory = Trajectory(tokenizer, generate, {"temperature": 1.0}, 512)
        async with bench.resources() as resources:
            task = Task(id="t", prompt="What is 2 plus 2?", answer="4")
            return await traced_rollout(
                bench, task, trajectory, max_turns=5, seed=0, resources=resources, max_tokens=cap
            )

    result = asyncio.run(run())
    assert result.passed and len(seen) == 2
    assert seen[0] == first
    # the second reply: the cap, or what the budget has left after the first reply and the tool's answer
    second = len(tokenizer(turns[1], add_special_tokens=False)["input_ids"]) + 1
    left = 512 - (len(result.trajectory.response_ids) - second)
    assert seen[1] == min(first, left)


def test_a_rollout_without_llm_calls_fails_loudly(tokenizer: Any) -> None:
    _, bench, _ = open_benchmark("math", "smoke-verl")

    async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], None]:
        raise AssertionError("not reached: the budget is empty")

    async def run() -> None:
        trajectory = Trajectory(tokenizer, generate, {"temperature": 1.0}, 0)
        async with bench.resources() as resources:
            await traced_rollout(
                bench, Task(id="t", prompt="1+1?", answer="2"), trajectory, max_turns=2, seed=0, resources=resources
            )

    with pytest.raises(NoTrainableTokens, match="no LLM call"):
        asyncio.run(run())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_rollouts_on_a_multi_worker_ray_cluster(
    smoke_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray head started here (as `ray start` on a cluster's head node), joined by address; two rollout workers
    run the agent with the real model and the real calculator and return trainable traces."""
    pytest.importorskip("ray")
    from harness.assets.data import load_split
    from harness.engines.verl.cluster import cluster_rollouts

    # A throw-away cluster on this machine: no token authentication (the head and this driver share no token file).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    # Ray kills workers when the machine's memory is nearly full, whoever fills it; the two workers need ~2 GB.
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "0")
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths must stay short
    log = tmp_path / "ray-head.log"
    with log.open("w") as out:
        head = subprocess.Popen(
            [
                str(ray_bin),
                "start",
                "--head",
                "--block",
                f"--port={port}",
                "--num-cpus=2",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={temp_dir}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "will now block" not in log.read_text():
            assert head.poll() is None, f"ray start exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the Ray head did not start in 180 s"
            time.sleep(1)
        spec = load_spec(MATH_SPEC, "smoke-verl")
        _, bench, _ = open_benchmark("math", "smoke-verl")
        rows, _ = load_split(spec.dataset, "test")
        tasks = bench.tasks(rows)[:2]
        results = cluster_rollouts(
            address=f"127.0.0.1:{port}",
            spec_path=MATH_SPEC,
            profile="smoke-verl",
            tasks=tasks,
            model_path=smoke_model,
            workers=2,
            sampling={"temperature": 0.0},
            budget=24,
        )
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=90)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert sorted(r.task_id for r in results) == sorted(t.id for t in tasks)
    assert len({r.pid for r in results}) == 2  # two workers, one task each
    for r in results:
        assert r.llm_calls >= 1 and r.trained_tokens > 0 and r.schema_version == 1
        assert len(r.response_ids) == len(r.response_mask) <= 24
        assert r.messages[1]["content"] in {t.prompt for t in tasks}
