"""Disk and time to build the images from nothing, as CI builds them (``scripts/build-images.sh``, every layer
again: ``HARNESS_BUILD_NO_CACHE=1``): the CPU and calculator images, BuildKit's cache emptied (``docker builder prune
-af``), then the GPU image, the cache emptied again. ``--side-by-side`` builds the GPU image in the background beside
the CPU and calculator images instead (CI's way before; the cache is then trimmed as after any build).

Free disk under Docker's data root is sampled every second. Printed: the peak disk the builds took (free before
minus the least free seen; one after another, each phase's too), what stays, the images' own sizes (the baseline),
their ratio, each build's wall time, and the size of the environments ``make env`` creates (``.venvs``). CI's
``HARNESS_CI_IMAGES_GIB`` is the peak plus those environments plus the tests' caches and a margin.

Images that existed keep their tags (the new builds take them).

Run: ``python bench/image_disk.py [--images cpu calculator gpu] [--side-by-side]``.
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


def empty_build_cache() -> None:
    subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", nargs="+", default=["cpu", "calculator", "gpu"])
    parser.add_argument("--side-by-side", action="store_true", help="the GPU image in the background beside the others")
    args = parser.parse_args()
    root = docker_root()
    env = {**os.environ, "HARNESS_BUILD_NO_CACHE": "1"}
    before = free_bytes(root)
    least = [before]
    phase = [""]
    phase_least: dict[str, int] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            free = free_bytes(root)
            least[0] = min(least[0], free)
            phase_least[phase[0]] = min(phase_least.get(phase[0], free), free)
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results: dict[str, tuple[float, list[str]]] = {}
    background = [i for i in args.images if i == "gpu"]
    foreground = [i for i in args.images if i != "gpu"]
    if not args.side_by_side:
        # The CPU images first: their build leaves a large cache (three environments built apart, then joined), so
        # it is emptied before the GPU image's build starts, with only the CPU images' own layers left behind.
        for imgs in (foreground, background):
            if imgs:
                phase[0] = " ".join(imgs)
                results[phase[0]] = build(imgs, env)
                empty_build_cache()
    else:
        threads = [
            threading.Thread(target=lambda imgs=imgs: results.__setitem__(" ".join(imgs), build(imgs, env)))
            for imgs in (background, foreground)
            if imgs
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    after = free_bytes(root)
    stop.set()
    sampler.join()
    peak = before - least[0]
    tags = [tag for _, built in results.values() for tag in built]
    sizes = sum(image_bytes(tag) for tag in tags)
    venvs = folder_bytes(ROOT / ".venvs")
    print(f"free under {root} before: {before / GIB:.1f} GiB, least while building: {least[0] / GIB:.1f} GiB")
    for name, (seconds, built) in results.items():
        print(f"built {name}: {' '.join(built)} in {seconds:.0f} s")
    how, cache = ("side by side", "trimmed") if args.side_by_side else ("one after another", "emptied")
    print(f"peak disk taken by the builds ({how}): {peak / GIB:.1f} GiB")
    if not args.side_by_side:
        for name in results:
            print(f"  peak while building {name}: {(before - phase_least.get(name, before)) / GIB:.1f} GiB")
    print(f"taken once built, build cache {cache}: {(before - after) / GIB:.1f} GiB")
    print(f"images' own sizes (baseline): {sizes / GIB:.1f} GiB; peak / sizes: {peak / sizes:.2f}")
    print(f"environments of make env (.venvs): {venvs / GIB:.1f} GiB")


if __name__ == "__main__":
    main()
