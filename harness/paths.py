"""Where the harness keeps things: the repository root, caches, artifacts and the helper environments."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Downloaded datasets and converted models (``HARNESS_CACHE``, default ``.cache/`` in the repository)."""
    return Path(os.environ.get("HARNESS_CACHE", REPO_ROOT / ".cache"))


def artifacts_dir() -> Path:
    """Checkpoints, logs and rollout records (``HARNESS_ARTIFACTS``, default ``artifacts/``); git-ignored."""
    return Path(os.environ.get("HARNESS_ARTIFACTS", REPO_ROOT / "artifacts"))


def results_dir() -> Path:
    """The committed result tables (``HARNESS_RESULTS``, default ``results/``)."""
    return Path(os.environ.get("HARNESS_RESULTS", REPO_ROOT / "results"))


def benchmarks_dir() -> Path:
    return Path(os.environ.get("HARNESS_BENCHMARKS", REPO_ROOT / "benchmarks"))


def env_python(name: str) -> Path:
    """The interpreter of a helper environment made by ``make`` (``serve-cpu``, ``calculator``).

    ``HARNESS_ENV_<NAME>`` points at another environment's root, e.g. inside a container image.
    """
    override = os.environ.get(f"HARNESS_ENV_{name.upper().replace('-', '_')}")
    root = Path(override) if override else REPO_ROOT / ".venvs" / name
    return root / "bin" / "python"
