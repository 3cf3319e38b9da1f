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


POLICY_LINK = "policy"


def link_policy(checkpoint: Path) -> Path | None:
    """Point ``<cache>/models/policy`` at a prepared policy checkpoint; return the link (None when not made).

    ``./.cache/models/policy`` is compose.yaml's default ``POLICY_MODEL_PATH``: after ``make bench-math`` (or
    ``harness prepare``) the policy servers and the ``*-eval`` services find the prepared model there. The link is
    relative, so it resolves on the host and wherever the cache is mounted. Only checkpoints inside the cache's
    ``models/`` are linked; an empty folder left there (Docker creates a missing bind source as an empty
    directory) is replaced, anything else is left alone.
    """
    models = cache_dir() / "models"
    try:
        target = checkpoint.resolve().relative_to(models.resolve())
    except (ValueError, OSError):
        return None
    if str(target) in (".", POLICY_LINK) or target.parts[0] == POLICY_LINK:
        return None
    link = models / POLICY_LINK
    tmp = models / f".{POLICY_LINK}.{os.getpid()}.tmp"
    try:
        if link.is_dir() and not link.is_symlink():
            link.rmdir()  # only when empty: OSError otherwise, and the folder stays
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
        return None
    return link
