"""The rollout settings of one run's evaluations and traced training rollouts, from its spec and seed."""

from __future__ import annotations

from harness.rollout.evaluate import EvalSettings
from harness.rollout.tracing import TraceStore
from harness.serving.simulator import SimulatorEndpoint
from harness.spec import BenchmarkSpec


def eval_settings(
    spec: BenchmarkSpec,
    seed: int,
    simulator: SimulatorEndpoint | None,
    base_url: str,
    temperature: float,
    n: int,
    trace: TraceStore | None = None,
) -> EvalSettings:
    """Settings for ``n`` samples per task against the policy server at ``base_url``; ``trace``: record tokens."""
    ev = spec.evaluation
    return EvalSettings(
        base_url=base_url,
        model=spec.model.name,
        temperature=temperature,
        max_tokens=ev.max_tokens,
        max_turns=spec.agent.max_turns,
        concurrency=ev.concurrency,
        samples_per_task=n,
        request_timeout_s=ev.request_timeout_s,
        retries=ev.retries,
        seed=seed,
        simulator_url=simulator.base_url if simulator else None,
        simulator_model=simulator.model if simulator else "",
        simulator_api_key=simulator.api_key if simulator else "EMPTY",
        trace=trace,
        json_tool_calls=spec.serving.json_tool_calls,
    )
