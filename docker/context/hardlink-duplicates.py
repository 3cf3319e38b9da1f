"""Replace identical files under the given folders by hard links to one copy (build time only).

The CPU image has three environments; two of them install the same torch wheel (about 0.7 GB unpacked).
Files at the same path relative to their ``site-packages`` with equal size and content become one inode, which the
image layer then stores once. Usage: python3 hardlink-duplicates.py /opt/venvs/a /opt/venvs/b ...
"""

from __future__ import annotations

import filecmp
import os
import sys
from pathlib import Path

MIN_SIZE = 64 * 1024


def site_files(venv: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for site in venv.glob("lib/python3*/site-packages"):
        for root, _, names in os.walk(site):
            for name in names:
                path = Path(root) / name
                if path.is_symlink() or not path.is_file() or path.stat().st_size < MIN_SIZE:
                    continue
                out[str(path.relative_to(site))] = path
    return out


def main(venvs: list[str]) -> None:
    seen: dict[str, Path] = {}
    saved = linked = 0
    for venv in venvs:
        for rel, path in site_files(Path(venv)).items():
            first = seen.setdefault(rel, path)
            if first is path:
                continue
            a, b = first.stat(), path.stat()
            if a.st_ino == b.st_ino or a.st_size != b.st_size or a.st_mode != b.st_mode:
                continue
            if filecmp.cmp(first, path, shallow=False):
                tmp = path.with_name(path.name + ".hardlink-tmp")
                os.link(first, tmp)
                os.replace(tmp, path)
                saved += b.st_size
                linked += 1
    print(f"hard-linked {linked} duplicate files, {saved / 1e6:.0f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
