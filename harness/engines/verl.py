"""The GPU engine's configuration: VERL GRPO through agent-lightning.

This module holds the typed schema of the spec's ``training.config`` for ``engine: verl`` (the seed's VERL
dictionary, key for key) and its translation into the dictionary agent-lightning's ``VERL`` algorithm takes.
Training itself needs CUDA GPUs and the GPU image (``docker/``); on a machine without them, ``train`` says so.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.engines.base import TrainRequest, TrainResult, register_engine
from harness.errors import EngineError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Algorithm(_Section):
    adv_estimator: Literal["grpo", "gae", "reinforce_plus_plus", "rloo", "grpo_passk"] = "grpo"


class Data(_Section):
    train_batch_size: int = Field(8, gt=0)
    max_prompt_length: int = Field(4096, gt=0)
    max_response_length: int = Field(1024, gt=0)


class MultiTurn(_Section):
    format: str = "hermes"


class Rollout(_Section):
    tensor_model_parallel_size: int = Field(1, gt=0)
    n: int = Field(4, gt=0)
    log_prob_micro_batch_size_per_gpu: int = Field(2, gt=0)
    multi_turn: MultiTurn = MultiTurn()
    name: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = Field(0.7, gt=0, le=1)


class Optim(_Section):
    lr: float = Field(1e-6, gt=0)


class FsdpConfig(_Section):
    param_offload: bool = False
    optimizer_offload: bool = False


class Actor(_Section):
    ppo_mini_batch_size: int = Field(8, gt=0)
    ppo_micro_batch_size_per_gpu: int = Field(2, gt=0)
    optim: Optim = Optim()
    use_kl_loss: bool = False
    clip_ratio_low: float = Field(0.2, ge=0)
    clip_ratio_high: float = Field(0.3, ge=0)
    fsdp_config: FsdpConfig = FsdpConfig()


class Ref(_Section):
    log_prob_micro_batch_size_per_gpu: int = Field(2, gt=0)
    fsdp_config: FsdpConfig = FsdpConfig()


class ModelCfg(_Section):
    path: str
    use_remove_padding: bool = True
    enable_gradient_checkpointing: bool = True


class ActorRolloutRef(_Section):
    rollout: Rollout = Rollout()
    actor: Actor = Actor()
    ref: Ref = Ref()
    model: ModelCfg


class Trainer(_Section):
    n_gpus_per_node: int = Field(1, gt=0)
    val_before_train: bool = True
    logger: list[str] = Field(default_factory=lambda: ["console"])
    nnodes: int = Field(1, gt=0)
    test_freq: int = Field(4, gt=0)
    total_epochs: int = Field(2, gt=0)


class VerlConfig(_Section):
    n_workers: int = Field(2, gt=0, description="agent-lightning rollout workers.")
    algorithm: Algorithm = Algorithm()
    data: Data = Data()
    actor_rollout_ref: ActorRolloutRef
    trainer: Trainer = Trainer()
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Further VERL keys as dotted paths, e.g. {'trainer.save_freq': 2}."
    )


def to_verl_dict(config: VerlConfig, model_path: str | None = None) -> dict[str, Any]:
    """The dictionary agent-lightning's ``VERL(...)`` takes: the keys the spec sets (VERL supplies the rest), with
    dotted overrides applied."""
    out = config.model_dump(mode="python", exclude={"n_workers", "overrides"}, exclude_unset=True)
    if model_path is not None:
        out["actor_rollout_ref"]["model"]["path"] = model_path
    for dotted, value in config.overrides.items():
        node = out
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = copy.deepcopy(value)
    return out


@register_engine
class VerlEngine:
    name: ClassVar[str] = "verl"
    config_model: ClassVar[type[BaseModel]] = VerlConfig

    def train(self, request: TrainRequest) -> TrainResult:
        try:
            import torch

            has_cuda = bool(torch.cuda.is_available())
        except ImportError:
            has_cuda = False
        if not has_cuda:
            raise EngineError(
                "the verl engine needs CUDA GPUs and the GPU image (docker/); use profile 'smoke' on a CPU machine"
            )
        raise EngineError("the verl engine runs inside the GPU image; start it with `docker compose up math-train`")
