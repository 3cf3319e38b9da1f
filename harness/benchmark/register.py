"""Benchmarks register through the harness's one :class:`~harness.registry.Registry`, found by their entrypoint.

A benchmark's entrypoint is imported by file path (benchmark folders are not packages), once per file, as a module
of its own; the one :class:`~harness.benchmark.protocol.Benchmark` subclass it registers with
:func:`register_benchmark` is found by that module, and named by its folder. Helper modules beside it are imported
with :func:`load_module`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from harness.benchmark.protocol import Benchmark
from harness.errors import SpecError
from harness.registry import Registry


def _module_of(cls: type[Benchmark]) -> str:
    return cls.__module__


BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmark", SpecError, key=_module_of)
"""Benchmark classes by the module of the entrypoint that registered them (one each)."""


def register_benchmark(cls: type[Any]) -> type[Any]:
    """Class decorator: make a :class:`Benchmark` subclass the benchmark of the entrypoint file defining it."""
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise SpecError(f"{getattr(cls, '__name__', cls)!r}: @register_benchmark needs a subclass of Benchmark")
    known = BENCHMARKS.find(cls.__module__)
    if known is not None and known.__qualname__ != cls.__qualname__:
        raise SpecError(
            f"{cls.__module__}: registers two benchmark classes ({known.__qualname__}, {cls.__qualname__}); "
            "a benchmark's entrypoint registers one"
        )
    return BENCHMARKS.register(cls)


def load_module(path: Path, name: str) -> Any:
    """Import a benchmark's helper module by file path (benchmarks are folders, not packages)."""
    if name in sys.modules:
        return sys.modules[name]
    mod_spec = importlib.util.spec_from_file_location(name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise SpecError(f"{path}: cannot import")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    mod_spec.loader.exec_module(module)
    return module
