"""Training engines, registered by name."""

from __future__ import annotations

from typing import Any

from harness.engines.base import ENGINES, Engine, TrainRequest, TrainResult, register_engine


def _load_builtin() -> None:
    # Importing an engine module registers it; heavy dependencies are imported lazily inside ``train``.
    from harness.engines.trace import engine as _trace  # noqa: F401
    from harness.engines.trl import engine as _trl  # noqa: F401
    from harness.engines.verl import engine as _verl  # noqa: F401


ENGINES.load = _load_builtin


def engine_names() -> list[str]:
    return ENGINES.names()


def get_engine_class(name: str) -> type[Any]:
    return ENGINES.get(name)


def get_engine(name: str) -> Engine:
    engine: Engine = get_engine_class(name)()
    return engine


def check_engine(spec: Any, bench: Any) -> None:
    """Raise SpecError when ``bench`` cannot train with the spec's engine as configured (the engine's ``check``)."""
    check = getattr(get_engine_class(spec.training.engine), "check", None)
    if check is not None:
        check(spec, bench)


__all__ = [
    "Engine",
    "TrainRequest",
    "TrainResult",
    "check_engine",
    "engine_names",
    "get_engine",
    "get_engine_class",
    "register_engine",
]
