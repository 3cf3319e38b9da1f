"""The ``verl`` engine: VERL's GRPO trainer with vLLM rollouts on GPUs, running the benchmark's own agent.

``engine`` (spec -> VERL config, launch, checkpoint merge), ``compose`` (VERL's own defaults with the run's keys, and
VERL's own check of them), ``worker`` (the trainer process), ``agent_loop`` (VERL's
agent loop calling the benchmark's rollout), ``rollout`` (the traced rollout: tokens, masks, reward), ``rows`` (a
training row's versioned task, written by the worker and read by the agent loop), ``traces`` (the agent loop's
versioned line per rollout, read back by the worker), ``cluster`` (Ray: local head or a cluster by
address; rollouts on a cluster without training).
"""
