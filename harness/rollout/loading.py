"""Finding and importing benchmarks: ``benchmarks/<name>/`` (or ``HARNESS_BENCHMARKS``), its spec and its code.

A benchmark's entrypoint is imported by file path (benchmark folders are not packages), once per file, as a module
of its own, and must register exactly one :class:`~harness.benchmark.Benchmark` subclass with
:func:`~harness.benchmark.register_benchmark`. The folder's name is the benchmark's name: the spec's ``name`` may
be left out, and a class need not say it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from harness.benchmark import BENCHMARKS, Benchmark, load_module
from harness.errors import HarnessError, SpecError
from harness.paths import benchmarks_dir
from harness.registry import did_you_mean
from harness.spec import BenchmarkSpec, load_spec


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
        cls = BENCHMARKS.find(module)
        if cls is None:
            raise SpecError(f"{entry}: no class registered with @register_benchmark for benchmark {spec.name!r}")
        said = cls.__dict__.get("name")
        if said is not None and said != spec.name:
            raise SpecError(f"{entry}: {cls.__name__}.name {said!r} is not the benchmark's name {spec.name!r}")
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
