"""Stage 9, engines: training behind one interface (:class:`~harness.engines.base.Engine`).

``base`` (the Engine base class with its optional capabilities and the shared config keys; WorkerEngine, the
skeleton of an engine whose training run is one worker process), ``request`` (TrainRequest/TrainResult), ``keys``
(an engine's config keys with types and defaults), ``shaping`` (the training reward: the rollout's task reward plus
weighted shaping terms), ``signal`` (GRPO's signal per step: the groups whose rewards differ, mean absolute
advantage; and the share to expect), ``curves`` (the harness's per-step scalars for TensorBoard), ``child`` (a
trainer in a child process, its progress lines, its exit named), ``progress`` (a trainer's versioned record of each
step, from its worker to the engine), ``jobs`` (the versioned files an engine and its worker pass: job files,
``trace-grpo``'s triplets, ``harness-train.json``), and one subpackage per engine: ``trl/`` (``trl-grpo``: TRL's
GRPOTrainer, CPU, single-turn), ``trace/`` (``trace-grpo``: GRPO on the benchmark's own traced rollouts), ``verl/``
(``verl``: VERL's GRPO with vLLM rollouts on GPUs). A new engine is a subpackage with a class registered by
:func:`~harness.engines.base.register_engine`, imported in :func:`_load_builtin`; one that trains in a single worker
process derives from :class:`~harness.engines.base.WorkerEngine` and supplies its job and worker module.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from harness.benchmark.protocol import Benchmark
from harness.engines.base import ENGINES, Engine, TrainRequest, TrainResult, register_engine
from harness.errors import SpecError
from harness.records import first_error
from harness.registry import did_you_mean
from harness.spec import BenchmarkSpec, load_spec


def _load_builtin() -> None:
    # Importing an engine module registers it; heavy dependencies are imported lazily inside ``train``.
    from harness.engines.trace import engine as _trace  # noqa: F401
    from harness.engines.trl import engine as _trl  # noqa: F401
    from harness.engines.verl import engine as _verl  # noqa: F401


ENGINES.load = _load_builtin


def engine_names() -> list[str]:
    return ENGINES.names()


def get_engine_class(name: str) -> type[Engine]:
    return ENGINES.get(name)


def get_engine(name: str) -> Engine:
    return get_engine_class(name)()


def validate_training(spec: BenchmarkSpec, path: Path) -> None:
    """The spec's ``training`` against its engine: a known engine name, and a config the engine accepts. One line
    naming the file and the key, as every spec error."""
    names = engine_names()
    if spec.training.engine not in names:
        raise SpecError(
            f"{path}: training.engine: unknown engine {spec.training.engine!r}"
            f"{did_you_mean(spec.training.engine, names)} (engines: {', '.join(names)})"
        )
    try:
        get_engine_class(spec.training.engine).config(spec)
    except ValidationError as err:
        raise SpecError(f"{path}: training.config.{first_error(err)}") from None


def load_checked_spec(path: Path, profile: str | None = None) -> BenchmarkSpec:
    """:func:`harness.spec.load_spec` and :func:`validate_training`: the whole spec, as a run reads it."""
    spec = load_spec(path, profile)
    validate_training(spec, path)
    return spec


def check_engine(spec: BenchmarkSpec, bench: Benchmark) -> None:
    """Raise :class:`SpecError` when ``bench`` cannot train with the spec's engine as configured."""
    get_engine_class(spec.training.engine).check(spec, bench)


__all__ = [
    "Engine",
    "TrainRequest",
    "TrainResult",
    "check_engine",
    "engine_names",
    "get_engine",
    "get_engine_class",
    "load_checked_spec",
    "register_engine",
    "validate_training",
]
