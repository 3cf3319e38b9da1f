"""The ``trl-grpo`` engine: TRL's GRPOTrainer on a CPU, single-turn (``engine``: checks and launches; ``worker``:
the trainer process)."""
