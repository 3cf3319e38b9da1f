"""Generate the arith benchmark's tasks (run once; the files are committed and pinned by sha256 in spec.yaml).

    python benchmarks/arith/make_data.py

Each task is one addition or subtraction of small whole numbers, e.g. ``What is 17 + 8?``. The splits are
disjoint: no (a, op, b) triple appears in both.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 20260101
SIZES = {"train": 400, "test": 100}
MAX_OPERAND = 20


def _problems(rng: random.Random) -> list[tuple[int, str, int]]:
    numbers = range(MAX_OPERAND + 1)
    pairs = [(a, op, b) for a in numbers for b in numbers for op in "+-" if op == "+" or a >= b]
    rng.shuffle(pairs)
    return pairs


def write(folder: Path) -> None:
    """Write ``train.jsonl`` and ``test.jsonl`` into ``folder``."""
    rng = random.Random(SEED)  # noqa: S311 - a reproducible dataset, not security
    problems = _problems(rng)
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for split, size in SIZES.items():
        with (folder / f"{split}.jsonl").open("w", encoding="utf-8", newline="\n") as out:
            for i, (a, op, b) in enumerate(problems[start : start + size]):
                result = a + b if op == "+" else a - b
                row = {"id": f"{split}-{i:03d}", "question": f"What is {a} {op} {b}?", "result": str(result)}
                out.write(json.dumps(row) + "\n")
        start += size


if __name__ == "__main__":
    write(Path(__file__).with_name("data"))
