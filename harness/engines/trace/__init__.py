"""The ``trace-grpo`` engine: GRPO on the benchmark's own traced rollouts (``engine``: collects rollouts through the
run's policy server and launches; ``worker``: the policy-gradient step)."""
