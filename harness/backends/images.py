"""Which images the Docker backend runs: ``HARNESS_CPU_IMAGE`` / ``HARNESS_CALCULATOR_IMAGE``, else this checkout's
content-derived tags (``scripts/build-images.sh --tags-only``, so the code in a container is the checkout's), else
``:latest`` outside a checkout."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

CPU_IMAGE_ENV = "HARNESS_CPU_IMAGE"
CALCULATOR_IMAGE_ENV = "HARNESS_CALCULATOR_IMAGE"
DEFAULT_CPU_IMAGE = "harness-cpu:latest"
DEFAULT_CALCULATOR_IMAGE = "harness-calculator:latest"

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build-images.sh"


@functools.lru_cache(maxsize=1)
def checkout_tags() -> tuple[str, str] | None:
    """This checkout's content-derived image tags (cpu, calculator), or None outside a checkout."""
    if not BUILD_SCRIPT.exists():
        return None
    try:
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT), "--tags-only", "cpu", "calculator"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    tags = proc.stdout.split()
    if proc.returncode != 0 or len(tags) != 2:
        return None
    return tags[0], tags[1]


def image_refs() -> tuple[str, str]:
    """The (cpu, calculator) images a run uses: the environment's, else this checkout's, else ``:latest``."""
    tags = checkout_tags() or (DEFAULT_CPU_IMAGE, DEFAULT_CALCULATOR_IMAGE)
    return os.environ.get(CPU_IMAGE_ENV, tags[0]), os.environ.get(CALCULATOR_IMAGE_ENV, tags[1])


def missing_hint(ref: str) -> str:
    if checkout_tags() and ref in checkout_tags():  # type: ignore[operator]
        return f"docker image {ref} (this checkout's code) not built (make images)"
    return f"docker image {ref} not found (build it: scripts/build-images.sh)"
