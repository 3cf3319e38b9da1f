"""The arith benchmark: its reward, its shipped tasks (read from the benchmark folder) and its generator."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.assets.data import load_split
from harness.benchmark import Episode, MessageRecord, Task, TrainsSingleTurn, load_module
from harness.rollout.loading import open_benchmark
from harness.spec import load_spec
from support import REPO

ARITH = REPO / "benchmarks" / "arith"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_DATA_MIRROR", raising=False)
    return tmp_path / "cache"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("5 + 3 = 8", "8"),
        ("5 + 3 = 8.", "8"),
        ("10 + 0 = 10\n\nThis is a classic example", "10"),
        ("7 - 9 = -2", "-2"),
        ("x = 8.5", None),
        ("= 12.0", None),
        ("a == 3", None),
        ("2 = 3 = 8", "3"),
        ("To find 5 + 3, we add 5 and 3", None),
        ("", None),
    ],
)
def test_answer_is_the_whole_number_after_the_first_equals_sign(text: str, answer: str | None) -> None:
    _, bench, _ = open_benchmark("arith")
    assert bench.answer(text) == answer


def test_reward_format_and_partial_credit(cache: Path) -> None:
    _, bench, _ = open_benchmark("arith")
    task = Task(id="t", prompt="What is 5 + 3?", answer="8")
    assert bench.score("5 + 3 = 8.", task) == 1.0
    assert bench.score("5 + 3 = 9", task) == 0.0
    assert bench.score("The answer is 8", task) == 0.0
    assert isinstance(bench, TrainsSingleTurn)

    def terms(text: str) -> dict[str, float]:
        return bench.shaping(Episode(task_id="t", messages=[MessageRecord(role="assistant", text=text)]), task)

    assert terms("5 + 3 = 9") == {"format_reward": 1.0, "partial_credit": 0.5}
    assert terms("The answer is 8") == {"format_reward": 0.0, "partial_credit": 0.0}
    assert bench.training_tools() == []
    prompt = bench.training_prompt(task)
    assert [m["role"] for m in prompt] == ["system", "user"] and prompt[1]["content"] == "What is 5 + 3?"


def test_tasks_ship_in_the_benchmark_folder(cache: Path) -> None:
    spec = load_spec(ARITH / "spec.yaml")
    _, bench, _ = open_benchmark("arith")
    train_rows, resolved = load_split(spec.dataset, "train")
    test_rows, _ = load_split(spec.dataset, "test")
    assert resolved.origin == "benchmark:data"
    assert len(train_rows) >= 200 and len(test_rows) >= 50
    train, test = bench.tasks(train_rows), bench.tasks(test_rows)
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    for task in train + test:
        a, op, b = task.prompt.removeprefix("What is ").removesuffix("?").split()
        assert int(task.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))
        assert bench.score(f"{task.prompt[8:-1]} = {task.answer}", task) == 1.0


def test_generator_reproduces_the_pinned_files(tmp_path: Path) -> None:
    make_data = load_module(ARITH / "make_data.py", "harness_benchmark_arith_make_data")
    make_data.write(tmp_path)
    spec = load_spec(ARITH / "spec.yaml")
    for entry in spec.dataset.splits.values():
        assert hashlib.sha256((tmp_path / entry.path).read_bytes()).hexdigest() == entry.sha256
