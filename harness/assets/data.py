"""Datasets: fetch from the pinned source or an offline mirror, verify sha256, cache.

Lookup order for each split file:

1. the cache (``<cache>/datasets/<name>/<sha256>/<file>``), re-verified on every use;
2. a local copy named by the spec's ``local_dir_env`` variable, when it is set (e.g. ``TAU2_DATA_DIR``);
3. an offline mirror directory (``--data-mirror`` or ``HARNESS_DATA_MIRROR``), laid out as ``<mirror>/<name>/<path>``;
4. the pinned source: a URL, or ``package://<dist>==<version>/<folder>`` inside an installed package.

A relative ``source`` (e.g. ``data``) is a folder inside the benchmark's own folder: its files ship with the
benchmark, so they are read from there (after the cache) and never from a local copy or a mirror.

A split may ``select`` part of a file: a seeded shuffle slice, the ids listed in another pinned file, or a seeded
shuffle slice of those.

A file whose hash does not match is never used: it is reported with both digests and left out of the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import DataError
from harness.paths import cache_dir
from harness.spec import DatasetFile, DatasetSpec
from harness.spec.schema import IdsSelect, ShuffleSelect

MIRROR_ENV = "HARNESS_DATA_MIRROR"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class ResolvedFile:
    split: str
    path: Path
    sha256: str
    origin: str  # "cache", "mirror:<dir>" or the URL


def _mirror_dir(explicit: Path | None) -> Path | None:
    if explicit is not None:
        return explicit
    env = os.environ.get(MIRROR_ENV)
    return Path(env) if env else None


def _atomic_copy_verified(src_read: Any, dest: Path, expected: str, origin: str) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src_read, out)
        got = sha256_file(tmp)
        if got != expected:
            raise DataError(f"{origin}: sha256 mismatch for {dest.name}: expected {expected}, got {got}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def fetch_file(dataset: DatasetSpec, split: str, entry: DatasetFile, mirror: Path | None = None) -> ResolvedFile:
    cached = cache_dir() / "datasets" / dataset.name / entry.sha256 / Path(entry.path).name
    if cached.exists():
        if sha256_file(cached) == entry.sha256:
            return ResolvedFile(split, cached, entry.sha256, "cache")
        cached.unlink()  # corrupted cache entry: fetch again

    if dataset.in_benchmark:
        return _from_benchmark(dataset, split, entry, cached)

    local_env = dataset.local_dir_env
    if local_env and os.environ.get(local_env):
        candidate = Path(os.environ[local_env]) / dataset.local_subdir / entry.path
        if not candidate.is_file():
            raise DataError(f"{local_env}: {candidate} not found")
        with candidate.open("rb") as src:
            _atomic_copy_verified(src, cached, entry.sha256, f"{local_env} ({candidate})")
        return ResolvedFile(split, cached, entry.sha256, f"{local_env}")

    mirror_root = _mirror_dir(mirror)
    if mirror_root is not None:
        candidate = mirror_root / dataset.name / entry.path
        if not candidate.exists():
            candidate = mirror_root / dataset.name / Path(entry.path).name
        if candidate.exists():
            with candidate.open("rb") as src:
                _atomic_copy_verified(src, cached, entry.sha256, str(candidate))
            return ResolvedFile(split, cached, entry.sha256, f"mirror:{mirror_root}")
        if mirror is not None:
            raise DataError(f"{candidate}: not found in the data mirror")

    if dataset.source.startswith("package://"):
        return _from_package(dataset, split, entry, cached)

    url = f"{dataset.source}/{entry.path}"
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - URL comes from the pinned spec
            _atomic_copy_verified(resp, cached, entry.sha256, url)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        hint = f" (set {MIRROR_ENV} or --data-mirror to an offline copy)"
        raise DataError(f"{url}: download failed: {getattr(exc, 'reason', exc)}{hint}") from None
    return ResolvedFile(split, cached, entry.sha256, url)


def _from_benchmark(dataset: DatasetSpec, split: str, entry: DatasetFile, cached: Path) -> ResolvedFile:
    if dataset.folder is None:
        raise DataError(f"dataset {dataset.name}: source {dataset.source!r} is relative but has no folder")
    path = dataset.folder / dataset.source / entry.path
    if not path.resolve().is_relative_to(dataset.folder.resolve()):
        raise DataError(f"dataset {dataset.name}: {entry.path!r} is outside the benchmark folder")
    if not path.is_file():
        raise DataError(f"{path}: not found (dataset {dataset.name}, source {dataset.source!r})")
    with path.open("rb") as src:
        _atomic_copy_verified(src, cached, entry.sha256, str(path))
    return ResolvedFile(split, cached, entry.sha256, f"benchmark:{dataset.source}")


def _from_package(dataset: DatasetSpec, split: str, entry: DatasetFile, cached: Path) -> ResolvedFile:
    from importlib import metadata

    pin, _, folder = dataset.source.removeprefix("package://").partition("/")
    dist_name, _, version = pin.partition("==")
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise DataError(f"{dataset.source}: package {dist_name} is not installed (pin {pin})") from None
    if dist.version != version:
        raise DataError(f"{dataset.source}: {dist_name} {dist.version} is installed, the spec pins {version}")
    path = Path(str(dist.locate_file(f"{folder}/{entry.path}")))
    if not path.is_file():
        raise DataError(f"{dataset.source}: {entry.path} not found in package {pin}")
    with path.open("rb") as src:
        _atomic_copy_verified(src, cached, entry.sha256, f"{dataset.source}/{entry.path}")
    return ResolvedFile(split, cached, entry.sha256, f"package {pin}")


def fetch_split(dataset: DatasetSpec, split: str, mirror: Path | None = None) -> ResolvedFile:
    if split not in dataset.splits:
        raise DataError(f"dataset {dataset.name}: no split {split!r} (splits: {', '.join(sorted(dataset.splits))})")
    return fetch_file(dataset, split, dataset.splits[split], mirror)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: each line must be a JSON object")
            rows.append(row)
    return rows


def read_json_rows(path: Path) -> list[dict[str, Any]]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: expected a JSON array of objects")
    return rows


def select_rows(
    dataset: DatasetSpec, split: str, rows: list[dict[str, Any]], mirror: Path | None = None
) -> list[dict[str, Any]]:
    """Apply the split's ``select`` (if any) to the rows of its file: the listed ids first (in the listing's order),
    then the seeded shuffle slice."""
    sel = dataset.splits[split].select
    if isinstance(sel, IdsSelect):
        rows = _listed_rows(dataset, split, sel, rows, mirror)
    if isinstance(sel, ShuffleSelect):
        order = list(range(len(rows)))
        random.Random(sel.shuffle_seed).shuffle(order)  # noqa: S311 - a reproducible split, not security
        lo, hi = int(len(rows) * sel.start), int(len(rows) * sel.end)
        rows = [rows[i] for i in order[lo:hi]]
    return rows


def _listed_rows(
    dataset: DatasetSpec, split: str, sel: IdsSelect, rows: list[dict[str, Any]], mirror: Path | None
) -> list[dict[str, Any]]:
    """The rows whose ``id`` is listed under ``sel.key`` in the pinned ids file, in the listing's order."""
    ids_entry = DatasetFile(path=sel.ids_file, sha256=sel.ids_sha256)
    ids_file = fetch_file(dataset, f"{split}:ids", ids_entry, mirror)
    listing = json.loads(ids_file.path.read_text(encoding="utf-8"))
    if not isinstance(listing, dict) or sel.key not in listing:
        raise DataError(f"{sel.ids_file}: no key {sel.key!r} (keys: {', '.join(sorted(listing))})")
    wanted = [str(i) for i in listing[sel.key]]
    by_id = {str(r.get("id")): r for r in rows}
    missing = [i for i in wanted if i not in by_id]
    if missing:
        raise DataError(f"{sel.ids_file}: {len(missing)} ids under {sel.key!r} are not in the rows (e.g. {missing[0]})")
    return [by_id[i] for i in wanted]


def readable_offline(dataset: DatasetSpec, split: str) -> bool:
    """Whether :func:`load_split` can read ``split`` without the network: the files ship with the benchmark, sit in
    the cache, or come from a package or the spec's local copy (neither downloads; a missing one is a DataError)."""
    entry = dataset.splits.get(split)
    if entry is None:
        return False
    if dataset.in_benchmark or dataset.source.startswith("package://"):
        return True
    if dataset.local_dir_env and os.environ.get(dataset.local_dir_env):
        return True
    files = [entry] + (
        [DatasetFile(path=entry.select.ids_file, sha256=entry.select.ids_sha256)]
        if isinstance(entry.select, IdsSelect)
        else []
    )
    return all((cache_dir() / "datasets" / dataset.name / f.sha256 / Path(f.path).name).exists() for f in files)


def load_split(
    dataset: DatasetSpec, split: str, mirror: Path | None = None
) -> tuple[list[dict[str, Any]], ResolvedFile]:
    resolved = fetch_split(dataset, split, mirror)
    rows = read_json_rows(resolved.path) if dataset.format == "json" else read_jsonl(resolved.path)
    return select_rows(dataset, split, rows, mirror), resolved


def rows_sha256(rows: list[dict[str, Any]]) -> str:
    """sha256 of ``rows`` as canonical JSON lines (sorted keys), in order: the identity of a selected split."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str).encode() + b"\n")
    return digest.hexdigest()
