"""Stage 7, rollout: the Benchmark protocol and the one scoring path that evaluation and training share.

``protocol`` (Task, Episode, RolloutContext, the Benchmark base class and its optional hooks), ``single_turn``
(SingleTurnBenchmark: a benchmark from ``prompt`` and ``score``), ``loading`` (finding and importing a benchmark
folder), ``evaluate`` (rollouts with bounded concurrency, retries and infra-error classification), ``records`` (the
rollouts JSONL), ``tracing`` (token ids of the policy's calls), ``toolcalls`` (tool calls read from reply text, the
same way in evaluation and training), ``blame`` (an agent's failure or a benchmark bug).

A benchmark's code imports what it needs from here: ``from harness.rollout import SingleTurnBenchmark, Task,
register_benchmark``.
"""

from harness.rollout.blame import AgentFailure
from harness.rollout.loading import load_module, register_benchmark
from harness.rollout.protocol import Benchmark, Episode, RolloutContext, Task, message_record
from harness.rollout.single_turn import SingleTurnBenchmark

__all__ = [
    "AgentFailure",
    "Benchmark",
    "Episode",
    "RolloutContext",
    "SingleTurnBenchmark",
    "Task",
    "load_module",
    "message_record",
    "register_benchmark",
]
