"""The Benchmark protocol: required hooks are enforced with one line, optional hooks have defaults, the registry
refuses a second class under a taken name, and `harness validate` imports the benchmark code."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.rollout.loading import load_benchmark, register_benchmark
from harness.rollout.protocol import Benchmark, Episode, Task
from harness.spec import load_spec
from support import MATH_SPEC, REPO


def test_optional_hooks_have_defaults() -> None:
    class Minimal(Benchmark):
        name = "minimal-protocol-test"

        def tasks(self, rows: list[dict[str, str]]) -> list[Task]:
            return []

        async def rollout(self, task: Task, ctx: object) -> Episode:
            return Episode(task.id, 0)

    assert not Minimal.trains_single_turn()
    assert Minimal.shaping_terms == ()

    async def resources() -> object:
        async with Minimal(load_spec(MATH_SPEC), MATH_SPEC.parent).resources() as r:
            return r

    assert asyncio.run(resources()) is None
    bench = Minimal(load_spec(MATH_SPEC), MATH_SPEC.parent)
    assert bench.shaping(Episode("t", 0), Task("t", "p", "a")) == {} and bench.training_tools() == []


def test_registry_takes_only_benchmarks_and_refuses_a_second_class_under_a_name() -> None:
    with pytest.raises(SpecError, match="needs a subclass of Benchmark"):
        register_benchmark(type("NotABenchmark", (), {"name": "x"}))

    def make() -> type[Benchmark]:
        class Same(Benchmark):
            name = "twice-protocol-test"

            def tasks(self, rows: list[dict[str, str]]) -> list[Task]:
                return []

            async def rollout(self, task: Task, ctx: object) -> Episode:
                return Episode(task.id, 0)

        return Same

    register_benchmark(make())
    register_benchmark(make())  # the same class imported again (a benchmark module loaded twice) is fine

    class Other(make()):  # type: ignore[misc]
        pass

    with pytest.raises(SpecError, match="'twice-protocol-test' is registered twice"):
        register_benchmark(Other)


def copy_math(tmp_path: Path) -> Path:
    folder = tmp_path / "benchmarks" / "math"
    shutil.copytree(MATH_SPEC.parent, folder)
    return folder


def test_a_benchmark_without_a_required_hook_is_one_line(tmp_path: Path) -> None:
    folder = copy_math(tmp_path)
    code = (folder / "benchmark.py").read_text()
    (folder / "benchmark.py").write_text(code.replace("async def rollout(", "async def not_rollout("))
    with pytest.raises(SpecError, match=r"benchmark 'math' does not implement rollout$"):
        load_benchmark(load_spec(folder / "spec.yaml"), folder)


def test_validate_imports_the_benchmark_code(tmp_path: Path) -> None:
    folder = copy_math(tmp_path)
    (folder / "benchmark.py").write_text((folder / "benchmark.py").read_text().replace("@register_benchmark\n", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "validate", str(folder / "spec.yaml"), "--profile", "smoke"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no class registered with @register_benchmark under name 'math'" in lines[0]


def test_a_benchmark_whose_packages_are_missing_is_one_line(tmp_path: Path) -> None:
    """Validating or running a benchmark where its packages are not installed (a GPU image without them) names the
    missing package in one line instead of a traceback."""
    from harness.errors import HarnessError

    folder = copy_math(tmp_path)
    code = (folder / "benchmark.py").read_text()
    marker = "from __future__ import annotations\n"
    (folder / "benchmark.py").write_text(code.replace(marker, marker + "import harness_no_such_package_xyz\n", 1))
    with pytest.raises(HarnessError) as err:
        load_benchmark(load_spec(folder / "spec.yaml"), folder)
    message = str(err.value)
    assert "\n" not in message and "benchmark 'math' imports harness_no_such_package_xyz" in message
    assert err.value.exit_code == 2
    # the same when the import happens as the benchmark is constructed (τ²'s compatibility patches do)
    init = "    async def rollout(self"
    (folder / "benchmark.py").write_text(
        code.replace(init, "    def __init__(self, *a, **k):\n        import harness_absent_at_init_xyz\n\n" + init, 1)
    )
    other = tmp_path / "again" / "math"
    shutil.copytree(folder, other)
    with pytest.raises(HarnessError, match=r"benchmark 'math' imports harness_absent_at_init_xyz, which"):
        load_benchmark(load_spec(other / "spec.yaml"), other)
