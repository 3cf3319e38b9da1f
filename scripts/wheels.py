"""Helpers of the packing scripts (gpu-wheels.sh, reference-wheels.sh); standard library only.

python3 scripts/wheels.py split LOCK PREFIX [--machine REGEX] [--keep FILE] [--sdist NAME ...]
    The lock's hash-locked entries, each kept whole, into PREFIX.carried (to carry as downloaded wheels),
    PREFIX.sdist (the pins PyPI has only as source distributions) and PREFIX.machine (names matching REGEX,
    left to the GPU machine, unless FILE pins them too).
python3 scripts/wheels.py pick CARRIED SRC DEST
    Link (or copy) into DEST the wheels in SRC of every pin in CARRIED; fail naming a pin that has none.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys


def norm(name: str, sep: str = "-") -> str:
    return re.sub(r"[-_.]+", sep, name).lower()


def entries(lock: str) -> list[str]:
    """The lock's entries, each with its continuation lines (hashes)."""
    out, cur = [], ""
    for raw in open(lock):
        line = raw.rstrip("\n")
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur += line + "\n"
        if not line.rstrip().endswith("\\"):
            out.append(cur)
            cur = ""
    return out


def split(lock: str, prefix: str, machine: str, keep: str | None, sdists: list[str]) -> None:
    proven = set()
    if keep:
        proven = {norm(ln.split("==")[0]) for ln in open(keep) if "==" in ln and not ln.lstrip().startswith("#")}
    wanted_sdists = {norm(s) for s in sdists}
    files = {k: open(f"{prefix}.{k}", "w") for k in ("carried", "sdist", "machine")}
    for entry in entries(lock):
        name = norm(entry.split("==")[0])
        if name in wanted_sdists:
            files["sdist"].write(entry)
        elif machine and re.match(machine, name) and name not in proven:
            files["machine"].write(name + "\n")
        else:
            files["carried"].write(entry)
    for f in files.values():
        f.close()


def pick(carried: str, src: str, dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    pins = [
        norm(ln.split("==")[0], "_") + "-" + ln.split("==")[1].split()[0].rstrip("\\").strip() + "-"
        for ln in open(carried)
        if "==" in ln
    ]
    files = [f for f in os.listdir(src) if f.endswith(".whl")]
    for pin in pins:
        found = [f for f in files if f.lower().startswith(pin)]
        if not found:
            sys.exit(f"no wheel for {pin[:-1]} in {src}")
        for f in found:
            try:
                os.link(os.path.join(src, f), os.path.join(dest, f))
            except OSError:
                shutil.copy(os.path.join(src, f), dest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split")
    s.add_argument("lock")
    s.add_argument("prefix")
    s.add_argument("--machine", default="")
    s.add_argument("--keep")
    s.add_argument("--sdist", nargs="*", default=[])
    p = sub.add_parser("pick")
    p.add_argument("carried")
    p.add_argument("src")
    p.add_argument("dest")
    args = parser.parse_args()
    if args.command == "split":
        split(args.lock, args.prefix, args.machine, args.keep, args.sdist)
    else:
        pick(args.carried, args.src, args.dest)


if __name__ == "__main__":
    main()
