"""The Benchmark protocol: required hooks are enforced with one line, optional hooks have defaults, the registry
refuses a second class in one entrypoint, `harness validate` imports the benchmark code, a benchmark's name is its
folder's, and the guide's single-turn benchmark is short and loads."""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.benchmark import (
    Benchmark,
    Episode,
    SingleTurnBenchmark,
    Task,
    TrainsSingleTurn,
    WritesNativeResults,
    register_benchmark,
)
from harness.errors import SpecError
from harness.rollout.loading import load_benchmark, open_benchmark
from harness.spec import load_spec, spec_hash
from support import MATH_SPEC, REPO


def test_optional_hooks_have_defaults() -> None:
    class Minimal(Benchmark):
        name = "minimal-protocol-test"

        def tasks(self, rows: list[dict[str, str]]) -> list[Task]:
            return []

        async def rollout(self, task: Task, ctx: object) -> Episode:
            return Episode(task_id=task.id)

    assert not issubclass(Minimal, TrainsSingleTurn) and not issubclass(Minimal, WritesNativeResults)
    assert Minimal.shaping_terms == ()

    async def resources() -> object:
        async with Minimal(load_spec(MATH_SPEC), MATH_SPEC.parent).resources() as r:
            return r

    assert asyncio.run(resources()) is None
    bench = Minimal(load_spec(MATH_SPEC), MATH_SPEC.parent)
    assert bench.shaping(Episode(task_id="t"), Task("t", "p", "a")) == {}
    assert bench.name == "math"  # the spec's, which is the folder's


def test_capabilities_are_declared() -> None:
    class Scored(SingleTurnBenchmark):
        def score(self, text: str, task: Task) -> float:
            return 1.0

    bench = Scored(load_spec(MATH_SPEC), MATH_SPEC.parent)
    assert isinstance(bench, TrainsSingleTurn) and not isinstance(bench, WritesNativeResults)
    assert bench.training_tools() == []
    assert SingleTurnBenchmark.__abstractmethods__ == frozenset({"score"})


def test_registry_takes_only_benchmarks_and_refuses_a_second_class_in_one_module() -> None:
    with pytest.raises(SpecError, match="needs a subclass of Benchmark"):
        register_benchmark(type("NotABenchmark", (), {"name": "x"}))

    def make() -> type[Benchmark]:
        class Same(Benchmark):
            def tasks(self, rows: list[dict[str, str]]) -> list[Task]:
                return []

            async def rollout(self, task: Task, ctx: object) -> Episode:
                return Episode(task_id=task.id)

        return Same

    register_benchmark(make())
    register_benchmark(make())  # the same class imported again (a benchmark module loaded twice) is fine

    class Other(make()):  # type: ignore[misc]
        pass

    with pytest.raises(SpecError, match=r"registers two benchmark classes \(.*Same, .*Other\)"):
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
    assert len(lines) == 1 and "no class registered with @register_benchmark for benchmark 'math'" in lines[0]


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


def test_validate_refuses_a_single_turn_benchmark_without_score(tmp_path: Path) -> None:
    folder = tmp_path / "benchmarks" / "arith"
    shutil.copytree(REPO / "benchmarks" / "arith", folder, ignore=shutil.ignore_patterns("__pycache__"))
    code = (folder / "benchmark.py").read_text()
    (folder / "benchmark.py").write_text(code.replace("    def score(self", "    def not_score(self"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "validate", str(folder / "spec.yaml")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("benchmark 'arith' does not implement score"), lines


def test_a_benchmarks_name_is_its_folders(tmp_path: Path) -> None:
    """The spec may leave ``name`` and a dataset named alike out (they are the folder's, and hash the same); a class
    or spec that says another name is one line."""
    spec, bench, _ = open_benchmark("arith")
    assert spec.name == spec.dataset.name == bench.name == "arith"
    folder = tmp_path / "benchmarks" / "arith"
    shutil.copytree(REPO / "benchmarks" / "arith", folder, ignore=shutil.ignore_patterns("__pycache__"))
    text = (folder / "spec.yaml").read_text()
    said = text.replace("dataset:\n", "name: arith\ndataset:\n  name: arith\n", 1)
    (folder / "spec.yaml").write_text(said)
    assert spec_hash(load_spec(folder / "spec.yaml")) == spec_hash(spec)
    code = (folder / "benchmark.py").read_text()
    (folder / "benchmark.py").write_text(
        code.replace("(SingleTurnBenchmark):\n", '(SingleTurnBenchmark):\n    name = "sums"\n')
    )
    with pytest.raises(SpecError, match=r"Arith.name 'sums' is not the benchmark's name 'arith'$"):
        load_benchmark(load_spec(folder / "spec.yaml"), folder)


def guide_files() -> dict[str, str]:
    """The files docs/adding-a-benchmark.md writes, by the path its code blocks open with."""
    guide = (REPO / "docs" / "adding-a-benchmark.md").read_text()
    blocks = re.findall(r"```(?:python|yaml)\n# (benchmarks/units/[a-z_.]+)\n(.*?)```", guide, re.S)
    return {path: text for path, text in blocks}


def test_the_guides_benchmark_is_short_and_validates(tmp_path: Path) -> None:
    files = guide_files()
    assert set(files) == {
        "benchmarks/units/make_data.py",
        "benchmarks/units/spec.yaml",
        "benchmarks/units/benchmark.py",
    }
    code = files["benchmarks/units/benchmark.py"]
    assert "from harness.benchmark import" in code
    for text in (code, (REPO / "benchmarks" / "arith" / "benchmark.py").read_text()):  # the worked example too
        assert len([line for line in text.splitlines() if line.strip()]) <= 35
    folder = tmp_path / "benchmarks" / "units"
    folder.mkdir(parents=True)
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    subprocess.run([sys.executable, str(folder / "make_data.py")], check=True, cwd=tmp_path)
    digest = hashlib.sha256((folder / "data" / "test.jsonl").read_bytes()).hexdigest()
    spec = (folder / "spec.yaml").read_text().replace("<the hash from sha256sum>", digest)
    (folder / "spec.yaml").write_text(spec)
    loaded = load_spec(folder / "spec.yaml")
    bench = load_benchmark(loaded, folder)
    assert bench.name == "units" and isinstance(bench, TrainsSingleTurn)
    task = Task("t000", "How many metres are 3 km? Answer with the number.", "3000")
    assert bench.score("3000", task) == 1.0 and bench.score("300", task) == 0.0


def test_a_single_turn_rollout_records_messages_as_before() -> None:
    """The rollout sends OpenAI messages through complete() and records them as {"role", "text"} dicts, the form
    every recorded rollout has."""
    from types import SimpleNamespace

    from harness.benchmark import RolloutContext

    sent: dict[str, object] = {}

    async def create(**kwargs: object) -> object:
        sent.update(kwargs)
        message = SimpleNamespace(content="2 + 3 = 5", tool_calls=None)
        usage = SimpleNamespace(prompt_tokens=7, completion_tokens=4)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage)

    client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    spec, bench, _ = open_benchmark("arith")
    ctx = RolloutContext("http://x", "m", 0.0, 16, 1, 5.0, seed=3, client=client)
    episode = asyncio.run(bench.rollout(Task("t", "What is 2 + 3?", "5"), ctx))
    system = spec.agent.instructions
    assert sent["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": "What is 2 + 3?"}]
    assert (sent["seed"], sent["max_tokens"], sent["timeout"]) == (3, 16, 5.0)
    assert [m.model_dump() for m in episode.messages] == [
        {"role": "system", "text": system},
        {"role": "user", "text": "What is 2 + 3?"},
        {"role": "assistant", "text": "2 + 3 = 5"},
    ]
    assert (episode.reward, episode.passed, episode.answer, episode.prompt_tokens) == (1.0, True, "5", 7)
