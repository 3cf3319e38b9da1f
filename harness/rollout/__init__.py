"""Stage 6, rollout: the Benchmark protocol and the one scoring path that evaluation and training share.

``protocol`` (Task, Episode, RolloutContext, the Benchmark base class and its optional hooks), ``single_turn``
(SingleTurnBenchmark: a benchmark from ``prompt`` and ``score``), ``loading`` (finding and importing a benchmark
folder), ``evaluate`` (rollouts with bounded concurrency, retries and infra-error classification), ``records`` (the
rollouts JSONL), ``tracing`` (token ids of the policy's calls), ``blame`` (an agent's failure or a benchmark bug).
"""
