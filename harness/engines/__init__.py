"""Training engines, registered by name."""

from __future__ import annotations

from typing import Any

from harness.engines.base import _ENGINES, Engine, TrainRequest, TrainResult, register_engine

_LOADED = False


def _load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    # Importing an engine module registers it; heavy dependencies are imported lazily inside ``train``.
    from harness.engines import trace_grpo, trl_grpo, verl  # noqa: F401

    _LOADED = True


def engine_names() -> list[str]:
    _load_builtin()
    return sorted(_ENGINES)


def get_engine_class(name: str) -> type[Any]:
    _load_builtin()
    return _ENGINES[name]


def get_engine(name: str) -> Engine:
    engine: Engine = get_engine_class(name)()
    return engine


__all__ = ["Engine", "TrainRequest", "TrainResult", "engine_names", "get_engine", "get_engine_class", "register_engine"]
