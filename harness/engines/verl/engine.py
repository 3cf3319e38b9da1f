"""The GPU engine: VERL GRPO with vLLM rollouts, training the benchmark's own Agent Framework agent.

``training.config`` for ``engine: verl`` is the reference recipe's VERL dictionary, key for key (:class:`VerlConfig`),
plus a few harness keys (rollout workers, task limits, reward shaping, dotted ``overrides``). :func:`to_verl_dict` turns
it into the dictionary of VERL keys it sets; :func:`verl_run_config` adds what the harness owns (data files, the
agent loop, checkpoints, metrics, Ray). Training runs in a child process (``harness.engines.verl.worker``) that
starts VERL's trainer on a Ray cluster: a local head unless an address is given (``--ray-address`` or
``RAY_ADDRESS``), with ``trainer.nnodes`` × ``trainer.n_gpus_per_node`` GPUs. Rollouts go through VERL's agent loop,
where ``harness.engines.verl.agent_loop`` runs the benchmark's agent against VERL's vLLM servers and traces every
LLM call to tokens. The final FSDP checkpoint is merged into a Hugging Face folder that the evaluation serves.
"""

from __future__ import annotations

import copy
import importlib.util
import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.benchmark.protocol import Benchmark
from harness.engines.base import EngineConfig, TrainRequest, WorkerEngine, register_engine
from harness.engines.jobs import SimulatorRef, VerlJob
from harness.engines.progress import ProgressRecord
from harness.errors import EngineError, HarnessError, SpecError
from harness.serving.server import GPU_START_ENV
from harness.spec import BenchmarkSpec

AGENT_LOOP_TARGET = "harness.engines.verl.agent_loop.HarnessAgentLoop"
AGENT_LOOP_NAME = "harness_agent"
# Keep NVLink multicast off in every process VERL starts (NCCL, PyTorch symmetric memory, NVSHMEM).
SIMULATOR_KEY_ENV = "HARNESS_VERL_SIMULATOR_KEY"
"""The user simulator's API key, for the rollout workers (passed in their environment, never written to a file)."""
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def rollout_env() -> dict[str, str]:
    """What VERL's processes (its worker, the Ray actors, their vLLM rollout servers) get in their environment:
    multicast off, and the servers' start-up settings of the harness's own (the user's environment wins for those)."""
    return {**MULTICAST_OFF, **{k: os.environ.get(k, v) for k, v in GPU_START_ENV.items()}}


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


class RefFsdpConfig(_Section):
    """The reference model has no optimizer: only its parameters can be offloaded."""

    param_offload: bool = False


class Ref(_Section):
    log_prob_micro_batch_size_per_gpu: int = Field(2, gt=0)
    fsdp_config: RefFsdpConfig = RefFsdpConfig()


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


class VerlConfig(EngineConfig):
    """``training.config`` of ``verl``: VERL's own keys (the reference recipe's dictionary, key for key) and the
    harness's (:data:`HARNESS_KEYS`)."""

    n_workers: int = Field(2, gt=0, description="Rollout workers (VERL agent-loop workers, Ray actors).")
    train_limit: int | None = Field(None, gt=0, description="Use only the first N training tasks.")
    val_limit: int | None = Field(None, gt=0, description="Validate on only the first N validation tasks.")
    algorithm: Algorithm = Algorithm()
    data: Data = Data()
    actor_rollout_ref: ActorRolloutRef
    trainer: Trainer = Trainer()
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Further VERL keys as dotted paths, e.g. {'trainer.save_freq': 2}."
    )


HARNESS_KEYS = {"n_workers", "train_limit", "val_limit", "shaping", "overrides"}
"""Keys of :class:`VerlConfig` that the harness uses itself; every other key is a VERL key."""


def to_verl_dict(config: VerlConfig, model_path: str | None = None) -> dict[str, Any]:
    """Every VERL key :class:`VerlConfig` models, as the spec sets it or else at the model's default (the reference
    recipe's value), with dotted overrides applied: the dictionary the seed passes to ``VERL(...)``. VERL's own
    defaults supply only the keys the model leaves out: where they differ (its advantage estimator is GAE, with a
    critic; it asks for 8 GPUs and 2-way tensor parallelism), a profile that sets a few keys would otherwise get
    VERL's, not the defaults ``harness engines verl`` lists."""
    out = config.model_dump(mode="python", exclude=HARNESS_KEYS)
    if model_path is not None:
        out["actor_rollout_ref"]["model"]["path"] = model_path
    for dotted, value in config.overrides.items():
        node = out
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = copy.deepcopy(value)
    return out


def deep_merge(into: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def _dotted(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def verl_run_config(
    config: VerlConfig,
    *,
    model_path: str,
    train_file: str,
    val_file: str | None,
    output_dir: Path,
    agent_loop_config: str,
    seed: int,
    ray_address: str | None,
    env_vars: dict[str, str] | None = None,
    tensorboard_dir: Path | None = None,
) -> dict[str, Any]:
    """The whole VERL configuration of one run: the spec's keys (:func:`to_verl_dict`) and what the harness owns.

    The harness sets the data files, the agent loop that runs the benchmark's agent, checkpoint and metrics
    locations, and Ray: ``ray_init.address`` is the given cluster or ``"local"`` (a new local head, even when
    ``RAY_ADDRESS`` is set in the environment). Keys the spec sets itself (through ``overrides``) win. With
    ``tensorboard_dir``, VERL's own TensorBoard logger writes the step curves there (``TENSORBOARD_DIR``).
    """
    spec_keys = to_verl_dict(config, model_path)
    harness: dict[str, Any] = {
        "data": {
            "train_files": train_file,
            "val_files": val_file or train_file,
            "seed": seed,
            "dataloader_num_workers": 0,
            "return_raw_chat": True,
        },
        "actor_rollout_ref": {
            "rollout": {
                "mode": "async",
                "agent": {
                    "num_workers": config.n_workers,
                    "default_agent_loop": AGENT_LOOP_NAME,
                    "agent_loop_config_path": agent_loop_config,
                },
            },
        },
        "trainer": {
            "project_name": "harness",
            "experiment_name": output_dir.parent.name or "run",
            "default_local_dir": str(output_dir / "verl-checkpoints"),
            "logger": ["console", "file"],
            "resume_mode": "disable",
            # any positive save_freq saves at the last step; a huge one saves only there
            "save_freq": 1_000_000_000,
        },
        "ray_kwargs": {
            "ray_init": {
                "address": ray_address or "local",
                "runtime_env": {"env_vars": dict(env_vars or {})},
            }
        },
    }
    merged = deep_merge(harness, spec_keys)
    if val_file is None:  # no validation split: nothing to validate on, whatever the reference recipe's schedule says
        merged["trainer"]["val_before_train"] = False
        merged["trainer"]["test_freq"] = -1
    # The spec's logger list cannot drop the file logger the harness reads its step metrics from.
    loggers = list(_dotted(merged, "trainer.logger") or [])
    wanted = ["file", "tensorboard"] if tensorboard_dir is not None else ["file"]
    merged["trainer"]["logger"] = [*loggers, *(w for w in wanted if w not in loggers)]
    if tensorboard_dir is not None:
        merged["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["TENSORBOARD_DIR"] = str(tensorboard_dir)
    return merged


def resolve_ray_address(explicit: str | None) -> str | None:
    """The Ray cluster to join: ``--ray-address``, else ``RAY_ADDRESS``, else None (start a local head)."""
    address = explicit or os.environ.get("RAY_ADDRESS") or None
    if address is not None and not address.strip():
        return None
    return address


@register_engine
class VerlEngine(WorkerEngine[VerlJob]):
    """VERL's GRPO with vLLM rollouts on GPUs (Ray), running the benchmark's own agent in its agent loop."""

    name: ClassVar[str] = "verl"
    config_model: ClassVar[type[EngineConfig]] = VerlConfig
    worker: ClassVar[str] = "harness.engines.verl.worker"

    @classmethod
    def group_size(cls, spec: BenchmarkSpec) -> int | None:
        config = VerlConfig.model_validate(spec.training.config)
        n = to_verl_dict(config).get("actor_rollout_ref", {}).get("rollout", {}).get("n")
        return int(n if n is not None else config.actor_rollout_ref.rollout.n)

    @classmethod
    def check(cls, spec: BenchmarkSpec, bench: Benchmark) -> None:
        """The shaping terms (:meth:`Engine.check`), no critic (the harness gives a critic no model), and, where
        VERL is installed (the GPU image, a GPU machine), VERL's own check of the composed config
        (:mod:`harness.engines.verl.compose`), so that a profile VERL refuses fails before anything starts."""
        super().check(spec, bench)
        config = VerlConfig.model_validate(spec.training.config)
        if config.algorithm.adv_estimator == "gae":
            raise SpecError(
                "training.config.algorithm.adv_estimator: gae trains a critic, which the verl engine does not set "
                "up: use grpo, rloo, reinforce_plus_plus or grpo_passk"
            )
        if importlib.util.find_spec("verl") is None:
            return
        from harness.engines.verl.compose import check, compose

        run = verl_run_config(
            config,
            model_path="/model",
            train_file="/data/train.parquet",
            val_file=None if spec.training.validation_split is None else "/data/val.parquet",
            output_dir=Path("/run/train"),
            agent_loop_config="/run/train/agent-loops.yaml",
            seed=0,
            ray_address=None,
        )
        try:
            check(compose(run))
        except EngineError as err:
            raise SpecError(f"training.config: {err}") from None

    def job(self, request: TrainRequest) -> VerlJob:
        ray_address = resolve_ray_address(request.ray_address)
        if ray_address is None:
            try:
                import torch

                gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
            except ImportError:
                gpus = 0
            if not gpus:
                raise HarnessError(  # the machine does not fit the profile: the user's to fix
                    "the verl engine needs CUDA GPUs (or a Ray cluster with them: --ray-address); "
                    "use profile 'smoke' on a CPU machine"
                )
            trainer = to_verl_dict(VerlConfig.model_validate(request.spec.training.config))["trainer"]
            wanted = int(trainer["n_gpus_per_node"]) * int(trainer["nnodes"])
            if wanted > gpus:
                raise HarnessError(
                    f"profile {request.spec.profile!r} trains on {wanted} GPUs (trainer.n_gpus_per_node x "
                    f"trainer.nnodes) and this machine has {gpus}: lower them in the profile, or give a Ray cluster "
                    "with --ray-address"
                )
        sim = request.simulator
        simulator = SimulatorRef(base_url=sim.base_url, model=sim.model) if sim else None
        return VerlJob.for_request(request, ray_address=ray_address, simulator=simulator)

    def total_steps(self, request: TrainRequest) -> int | None:
        """VERL's step count: ``trainer.total_training_steps`` where a profile sets it, else its epochs times the
        whole batches of training tasks an epoch holds (VERL drops a last partial batch); None when unknown."""
        config = VerlConfig.model_validate(request.spec.training.config)
        verl = to_verl_dict(config)
        fixed = verl["trainer"].get("total_training_steps")
        if fixed:
            return int(fixed)
        tasks = len(request.tasks)
        if config.train_limit is not None:
            tasks = min(tasks, config.train_limit)
        steps = tasks // int(verl["data"]["train_batch_size"]) * int(verl["trainer"]["total_epochs"])
        return steps or None

    def worker_env(self, request: TrainRequest, job: VerlJob) -> dict[str, str]:
        env = rollout_env()
        if request.simulator:
            env[SIMULATOR_KEY_ENV] = request.simulator.api_key  # to the rollout workers' environment only, never a file
        return env

    def worker_unset(self, job: VerlJob) -> tuple[str, ...]:
        return ("RAY_ADDRESS",) if job.ray_address is None else ()  # a local head, whatever the environment says

    def steps(self, checkpoint: Path, records: list[ProgressRecord]) -> int:
        """The steps the worker reported (a record with a step time)."""
        return sum(1 for r in records if r.step > 0 and r.step_time_s is not None)
