"""Paths shared by the tests (importable as ``support`` from test modules in this folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MATH_SPEC = REPO / "benchmarks" / "math" / "spec.yaml"
BFCL_SPEC = REPO / "benchmarks" / "bfcl" / "spec.yaml"
TAU2_SPEC = REPO / "benchmarks" / "tau2" / "spec.yaml"


def copy_math_benchmark(dest: Path, smoke_overrides: dict[str, Any]) -> Path:
    """Copy benchmarks/math to ``dest/math`` with ``smoke_overrides`` merged into its smoke profile."""
    import shutil

    import yaml

    from harness.spec.parse import deep_merge

    folder = dest / "math"
    shutil.copytree(MATH_SPEC.parent, folder, ignore=shutil.ignore_patterns("__pycache__"))
    raw = yaml.safe_load(MATH_SPEC.read_text())
    raw["profiles"]["smoke"] = deep_merge(raw["profiles"]["smoke"], smoke_overrides, top=False)
    (folder / "spec.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return folder / "spec.yaml"
