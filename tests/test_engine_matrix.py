"""Every engine x every benchmark: an engine either can train a benchmark or refuses before anything runs, and the
verl engine's rollout path works for each benchmark on a CPU.

VERL's agent loop hands each sample to :func:`harness.engines.verl.rollout.traced_rollout` (tested in
test_verl_engine.py for math's tool loop). Here it runs for every benchmark with the benchmark's real agent, its
real resources (math: the MCP calculator) and, for τ², a real served user simulator (vLLM on the CPU), while the
smoke model generates the policy's tokens through transformers, as a GPU rollout worker would through vLLM. So a
benchmark that cannot train under verl fails here, not on a GPU machine.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.assets.data import load_split
from harness.benchmark.protocol import SimulatorContext, TrainsSingleTurn
from harness.engines import check_engine, engine_names
from harness.engines.shaping import Shaping
from harness.engines.verl.cluster import transformers_generator
from harness.engines.verl.rollout import Trajectory, traced_rollout
from harness.errors import SpecError
from harness.rollout.loading import open_benchmark
from harness.spec import BenchmarkSpec
from support import REPO

# Every benchmark folder, at its default profile: a new benchmark joins the matrix by existing.
BENCHMARKS = sorted(p.parent.name for p in (REPO / "benchmarks").glob("*/spec.yaml"))


def budget(spec: BenchmarkSpec) -> int:
    """Response-token budget of one traced rollout. With a user simulator it counts the user's turns and the tool
    results too (they are part of the trajectory, untrained): τ²'s smoke-verl max_response_length."""
    return 1024 if spec.user_simulator is not None else 96


def test_the_matrix_finds_every_benchmark_folder() -> None:
    assert {"math", "arith", "tau2"} <= set(BENCHMARKS)
    assert not isinstance(open_benchmark("tau2")[1], TrainsSingleTurn)  # so the refusal below is exercised
    assert all((REPO / "benchmarks" / name / "benchmark.py").is_file() for name in BENCHMARKS)


# a profile whose training section configures each engine (its shaping dropped: the terms are per benchmark)
ENGINE_PROFILES = {"trl-grpo": ("math", "smoke"), "trace-grpo": ("tau2", "smoke"), "verl": ("math", "smoke-verl")}
UNSHAPED = {"shaping": {}, "format_reward": 0.0, "partial_credit": 0.0, "length_penalty": 0.0}


def with_engine(spec: BenchmarkSpec, engine: str, **config: Any) -> BenchmarkSpec:
    name, profile = ENGINE_PROFILES[engine]
    training = open_benchmark(name, profile)[0].training
    raw = dict(training.config)
    raw.update({k: v for k, v in UNSHAPED.items() if k in raw or (k == "shaping" and engine != "trl-grpo")})
    raw.update(config)
    return spec.model_copy(update={"training": training.model_copy(update={"config": raw})})


def test_the_matrix_covers_every_engine() -> None:
    assert set(ENGINE_PROFILES) == set(engine_names())


@pytest.mark.parametrize("engine", sorted(ENGINE_PROFILES))
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_engine_trains_the_benchmark_or_refuses_in_one_line(benchmark: str, engine: str) -> None:
    spec, bench, _ = open_benchmark(benchmark)
    spec = with_engine(spec, engine)
    if engine == "trl-grpo" and not isinstance(
        bench, TrainsSingleTurn
    ):  # e.g. τ²: a conversation with a user, no one prompt
        with pytest.raises(SpecError, match=r"no single-turn training hooks.*'trace-grpo' or 'verl'") as err:
            check_engine(spec, bench)
        assert "\n" not in str(err.value)
    else:
        check_engine(spec, bench)


def test_a_shaping_term_the_benchmark_lacks_is_named() -> None:
    spec, bench, _ = open_benchmark("tau2", "smoke")
    spec = with_engine(spec, "verl", shaping={"format_reward": 0.1, "length_penalty": 0.05})
    with pytest.raises(SpecError, match=r"format_reward is not a shaping term of benchmark 'tau2'.*action_credit"):
        check_engine(spec, bench)


@pytest.fixture
def policy(smoke_model: Path) -> tuple[Any, Any]:
    """A fresh generator for each test, so a test's samples do not depend on which tests ran before it."""
    return transformers_generator(str(smoke_model), seed=0)


@pytest.fixture(scope="module")
def user_simulator(smoke_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """τ²'s user simulator as a run serves it: the smoke model on a real vLLM server."""
    from harness.serving.server import serve

    spec = open_benchmark("tau2", "smoke")[0]
    log = tmp_path_factory.mktemp("simulator") / "server.log"
    with serve(smoke_model, "user-simulator", spec.serving, log) as server:
        server.wait_ready(600)
        yield server.endpoint


@pytest.mark.slow
@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_verl_rollout_path_runs_each_benchmark(
    benchmark: str, policy: tuple[Any, Any], request: pytest.FixtureRequest
) -> None:
    spec, bench, _ = open_benchmark(benchmark)
    tokenizer, generate = policy
    rows, _ = load_split(spec.dataset, spec.evaluation.split)
    task = bench.tasks(rows)[0]
    endpoint = request.getfixturevalue("user_simulator") if spec.user_simulator is not None else None
    shaping = Shaping.from_config(spec.training.config.get("shaping"))

    async def run() -> Any:
        import openai

        simulator = None
        if endpoint is not None:
            client = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key="EMPTY", max_retries=0)
            simulator = SimulatorContext(model=endpoint.model, client=client)
        trajectory = Trajectory(tokenizer, generate, {"temperature": 1.0}, budget(spec))
        try:
            async with bench.resources() as resources:
                return await traced_rollout(
                    bench,
                    task,
                    trajectory,
                    max_turns=spec.agent.max_turns,
                    max_tokens=spec.evaluation.max_tokens,
                    seed=0,
                    resources=resources,
                    shaping=shaping,
                    simulator=simulator,
                )
        finally:
            if simulator is not None:
                await simulator.client.close()

    result = asyncio.run(run())
    trajectory = result.trajectory
    # the agent ran to an episode (a benchmark error would be in result.error, with no episode)
    assert result.episode is not None, result.error
    assert result.episode.error_kind == "", result.episode.error
    assert trajectory.calls and sum(trajectory.response_mask) > 0  # generated tokens to train on
    assert len(trajectory.response_ids) == len(trajectory.response_mask)
    # the reward is the episode's, plus the profile's shaping: never more than the task reward and every term
    assert result.reward >= result.episode.reward - shaping.length_penalty
    assert result.reward <= result.episode.reward + sum(shaping.weights.values())
    assert result.passed == result.episode.passed
    if benchmark == "tau2":
        # the simulator spoke: user turns in the conversation beyond τ²'s opening, none of them trained
        users = [m for m in result.episode.messages if m.role == "user"]
        assert len(users) >= 1, result.episode.model_dump_json(include={"messages"})[:2000]
        assert "reward_info" in result.episode.info  # τ²'s own evaluator scored it
