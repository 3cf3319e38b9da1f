"""Finding and importing benchmarks: ``benchmarks/<name>/`` (or ``HARNESS_BENCHMARKS``), its spec and its code.

A benchmark's entrypoint is imported by file path (benchmark folders are not packages), once per file, and must
register exactly one :class:`~harness.rollout.protocol.Benchmark` subclass under the spec's ``name`` with
:func:`register_benchmark`. Helper modules beside it are imported with :func:`load_module`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, SpecError
from harness.paths import benchmarks_dir
from harness.registry import did_you_mean
from harness.rollout.protocol import Benchmark
from harness.spec import BenchmarkSpec, load_spec

_BY_MODULE: dict[str, list[type[Benchmark]]] = {}
"""The benchmark classes each entrypoint module registered."""


def register_benchmark(cls: type[Any]) -> type[Any]:
    """Class decorator: make a :class:`Benchmark` subclass known under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise SpecError(f"{getattr(cls, '__name__', cls)!r}: @register_benchmark needs a subclass of Benchmark")
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        raise SpecError(f"{cls.__name__}: a benchmark class needs a `name` string")
    known = _BY_MODULE.setdefault(cls.__module__, [])
    if any(c.name == cls.name and c.__qualname__ != cls.__qualname__ for c in known):
        raise SpecError(f"benchmark {cls.name!r} is registered twice in {cls.__module__}")
    known.append(cls)
    return cls


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


def available_benchmarks(root: Path | None = None) -> list[str]:
    root = root or benchmarks_dir()
    return sorted(p.parent.name for p in root.glob("*/spec.yaml"))


def spec_path(name: str, root: Path | None = None) -> Path:
    """``<root>/<name>/spec.yaml``; an unknown name is one line naming the folder searched and what is there."""
    root = root or benchmarks_dir()
    path = root / name / "spec.yaml"
    if not path.exists():
        names = available_benchmarks(root)
        raise SpecError(
            f"unknown benchmark {name!r}{did_you_mean(name, names)}: no {name}/spec.yaml in {root} "
            f"(benchmarks there: {', '.join(names) or 'none'}; HARNESS_BENCHMARKS names another folder)"
        )
    return path


def load_benchmark(spec: BenchmarkSpec, folder: Path) -> Benchmark:
    """Import the benchmark's entrypoint by file path and instantiate the registered class."""
    entry = folder / spec.entrypoint
    if not entry.exists():
        raise SpecError(f"{folder / 'spec.yaml'}: entrypoint: file {entry.name} not found in {folder}")
    # one module per entrypoint file: copies of a benchmark folder (or two folders) never share a class
    module = f"harness_benchmark_{spec.name}_{hashlib.sha256(str(entry.resolve()).encode()).hexdigest()[:12]}"
    try:
        load_module(entry, module)
        cls = next((c for c in _BY_MODULE.get(module, []) if c.name == spec.name), None)
        if cls is None:
            raise SpecError(f"{entry}: no class registered with @register_benchmark under name {spec.name!r}")
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            raise SpecError(f"{entry}: benchmark {spec.name!r} does not implement {', '.join(missing)}")
        bench = cls(spec, folder)
    except ModuleNotFoundError as exc:  # the benchmark's packages are not in this environment (or image)
        sys.modules.pop(module, None)
        raise HarnessError(
            f"{entry}: benchmark {spec.name!r} imports {exc.name or exc}, which this Python environment does not have "
            f"({sys.prefix}); install the benchmark's packages here, or run it where they are"
        ) from None
    return bench


def open_benchmark(name: str, profile: str | None = None) -> tuple[BenchmarkSpec, Benchmark, Path]:
    """The resolved spec of ``name`` at ``profile``, its loaded benchmark and the spec's path."""
    path = spec_path(name)
    spec = load_spec(path, profile)
    if spec.name != name:
        raise SpecError(f"{path}: name: {spec.name!r} does not match the folder name {name!r}")
    return spec, load_benchmark(spec, path.parent), path
