"""Stage 8, rollout: finding and loading benchmarks, and the one scoring path that evaluation and training share.

``loading`` (finding and importing a benchmark folder), ``evaluate`` (rollouts with bounded concurrency, retries and
infra-error classification), ``records`` (the rollouts JSONL), ``tracing`` (token ids of the policy's calls),
``toolcalls`` (tool calls read from reply text, the same way in evaluation and training), ``blame`` (an agent's
failure or a benchmark bug).

The protocol a benchmark implements is :mod:`harness.benchmark`, the package a benchmark's code imports from.
"""
