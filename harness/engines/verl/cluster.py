"""The verl engine's rollout side on a Ray cluster, without VERL's trainer.

VERL runs the agent loop in Ray actors (one per ``n_workers``) spread over the cluster's nodes. This module runs
the same traced rollouts (:func:`harness.engines.verl.rollout.traced_rollout`: the benchmark's agent, its tools,
its reward, the token trace) in Ray actors of any cluster, with a token generator given by name. It checks a
cluster before a long training run (every node imports the harness, reaches the benchmark's tools and produces
trainable traces), and it is how the CPU tests cover the multi-worker Ray path.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.benchmark.protocol import Task
from harness.engines.shaping import Shaping
from harness.engines.verl.rollout import Generate, Trajectory, traced_rollout


def transformers_generator(model_path: str, seed: int = 0) -> tuple[Any, Generate]:
    """A tokenizer and a token-in/token-out generator from a local checkpoint (transformers, CPU or GPU)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model.eval()
    generator = torch.Generator().manual_seed(seed)

    async def generate(prompt_ids: list[int], params: dict[str, Any]) -> tuple[list[int], list[float] | None]:
        temperature = float(params.get("temperature", 1.0))
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
        with torch.no_grad():
            out = model.generate(
                torch.tensor([prompt_ids]),
                max_new_tokens=int(params["max_tokens"]),
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                top_p=None,
                top_k=None,
                pad_token_id=tokenizer.eos_token_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[0, len(prompt_ids) :].tolist()
        logprobs = [
            float(torch.log_softmax(score[0].float(), dim=-1)[tok]) for score, tok in zip(out.scores, new, strict=False)
        ]
        return new, logprobs

    return tokenizer, generate


class ClusterRollout(BaseModel):
    """One traced rollout of a Ray actor, as it comes back to the driver: its task and reward, where it ran (node and
    process), the trajectory's tokens and counts, and the conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    task_id: str
    reward: float
    passed: bool
    error: str
    """Why the agent stopped early; empty when it did not."""
    node: str
    pid: int
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    """1 for a token the policy generated (trained), 0 for one the harness inserted (tool results, templates)."""
    messages: list[dict[str, Any]]
    llm_calls: int
    prompt_tokens: int
    response_tokens: int
    trained_tokens: int
    tool_calls: int


class RolloutWorker:
    """A Ray actor body: the benchmark, its resources and a generator, kept for all the rollouts it runs."""

    def __init__(self, spec_path: str, profile: str, model_path: str, seed: int) -> None:
        from harness.rollout.loading import load_benchmark
        from harness.spec import load_spec

        self.spec = load_spec(Path(spec_path), profile)
        self.bench = load_benchmark(self.spec, Path(spec_path).parent)
        self.tokenizer, self.generate = transformers_generator(model_path, seed)
        self.seed = seed
        self.stack: AsyncExitStack | None = None
        self.resources: Any = None

    async def rollouts(
        self, tasks: list[Task], sampling: dict[str, Any], budget: int, shaping: dict[str, float]
    ) -> list[ClusterRollout]:
        if self.stack is None:
            self.stack = AsyncExitStack()
            self.resources = await self.stack.enter_async_context(self.bench.resources())
        results = []
        for task in tasks:
            trajectory = Trajectory(self.tokenizer, self.generate, dict(sampling), budget)
            result = await traced_rollout(
                self.bench,
                task,
                trajectory,
                max_turns=self.spec.agent.max_turns,
                max_tokens=self.spec.evaluation.max_tokens,
                seed=self.seed,
                resources=self.resources,
                shaping=Shaping.from_config(shaping),
            )
            results.append(
                ClusterRollout(
                    task_id=task.id,
                    reward=result.reward,
                    passed=result.passed,
                    error=result.error,
                    node=os.uname().nodename,
                    pid=os.getpid(),
                    prompt_ids=trajectory.prompt_ids,
                    response_ids=trajectory.response_ids,
                    response_mask=trajectory.response_mask,
                    messages=trajectory.messages,
                    **trajectory.summary(),
                )
            )
        return results

    async def close(self) -> None:
        if self.stack is not None:
            await self.stack.aclose()
            self.stack = None


def cluster_rollouts(
    *,
    address: str | None,
    spec_path: Path,
    profile: str,
    tasks: list[Task],
    model_path: Path,
    workers: int,
    sampling: dict[str, Any],
    budget: int,
    shaping: dict[str, float] | None = None,
    seed: int = 0,
) -> list[ClusterRollout]:
    """Run traced rollouts of ``tasks`` on ``workers`` Ray actors of the cluster at ``address`` (None: local head).

    The harness's code reaches the actors through the runtime environment (``PYTHONPATH``), as in training.
    """
    import ray

    repo_root = str(Path(__file__).resolve().parents[2])
    python_path = os.pathsep.join(p for p in (repo_root, os.environ.get("PYTHONPATH", "")) if p)
    env_vars = {k: v for k, v in os.environ.items() if k.startswith("HARNESS_")}
    env_vars.update({"PYTHONPATH": python_path, "TOKENIZERS_PARALLELISM": "false"})
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address or "local", runtime_env={"env_vars": env_vars}, include_dashboard=False)
    try:
        actor_cls = ray.remote(num_cpus=0.5)(RolloutWorker)
        actors = [actor_cls.remote(str(spec_path), profile, str(model_path), seed + i) for i in range(workers)]
        shards = [tasks[i::workers] for i in range(workers)]
        refs = [a.rollouts.remote(s, sampling, budget, shaping or {}) for a, s in zip(actors, shards, strict=True)]
        results = [r for shard in ray.get(refs) for r in shard]
        ray.get([a.close.remote() for a in actors])
        return results
    finally:
        if started_here:
            ray.shutdown()
