"""Disk and time to build the images from nothing, as CI builds them: the GPU image in the background beside the CPU
and calculator images (``scripts/build-images.sh``, every layer again: ``HARNESS_BUILD_NO_CACHE=1``).

Free disk under Docker's data root is sampled every second while both builds run. Printed: the peak disk the
builds took (free before minus the least free seen), the images' own sizes (the baseline: what stays), their
ratio, and each build's wall time. CI's ``HARNESS_CI_IMAGES_GIB`` is this peak plus the environments ``make env``
creates (their size is printed too, from ``.venvs``) plus a margin.

The BuildKit cache the builds leave is trimmed by ``scripts/build-images.sh`` as after any build; images that
existed keep their tags (the new builds take them).

Run: ``python bench/image_disk.py [--images cpu calculator gpu]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIB = 1024**3


def docker_root() -> Path:
    out = subprocess.run(
        ["docker", "info", "--format", "{{.DockerRootDir}}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(out or "/var/lib/docker")


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def folder_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def image_bytes(tag: str) -> int:
    out = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Size}}", tag], capture_output=True, text=True, check=True
    ).stdout
    return int(out.strip())


def build(images: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    started = time.monotonic()
    done = subprocess.run(
        [str(ROOT / "scripts" / "build-images.sh"), *images],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"building {' '.join(images)} failed:\n{done.stderr[-2000:]}")
    return time.monotonic() - started, done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", nargs="+", default=["cpu", "calculator", "gpu"])
    args = parser.parse_args()
    root = docker_root()
    env = {**os.environ, "HARNESS_BUILD_NO_CACHE": "1"}
    before = free_bytes(root)
    least = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            least[0] = min(least[0], free_bytes(root))
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results: dict[str, tuple[float, list[str]]] = {}
    background = [i for i in args.images if i == "gpu"]
    foreground = [i for i in args.images if i != "gpu"]
    threads = [
        threading.Thread(target=lambda imgs=imgs: results.__setitem__(" ".join(imgs), build(imgs, env)))
        for imgs in (background, foreground)
        if imgs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    sampler.join()
    peak = before - least[0]
    tags = [tag for _, built in results.values() for tag in built]
    sizes = sum(image_bytes(tag) for tag in tags)
    venvs = folder_bytes(ROOT / ".venvs")
    print(f"free under {root} before: {before / GIB:.1f} GiB, least while building: {least[0] / GIB:.1f} GiB")
    for name, (seconds, built) in results.items():
        print(f"built {name}: {' '.join(built)} in {seconds:.0f} s")
    print(f"peak disk taken by the builds: {peak / GIB:.1f} GiB")
    print(f"images' own sizes (baseline): {sizes / GIB:.1f} GiB; peak / sizes: {peak / sizes:.2f}")
    print(f"environments of make env (.venvs): {venvs / GIB:.1f} GiB")


if __name__ == "__main__":
    main()
