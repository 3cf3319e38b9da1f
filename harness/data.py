"""Datasets: fetch from the pinned source or an offline mirror, verify sha256, cache.

Lookup order for each split file:

1. the cache (``<cache>/datasets/<name>/<sha256>/<file>``), re-verified on every use;
2. an offline mirror directory (``--data-mirror`` or ``HARNESS_DATA_MIRROR``), laid out as ``<mirror>/<name>/<path>``;
3. the pinned source URL.

A file whose hash does not match is never used: it is reported with both digests and left out of the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
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

    url = f"{dataset.source}/{entry.path}"
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - URL comes from the pinned spec
            _atomic_copy_verified(resp, cached, entry.sha256, url)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        hint = f" (set {MIRROR_ENV} or --data-mirror to an offline copy)"
        raise DataError(f"{url}: download failed: {getattr(exc, 'reason', exc)}{hint}") from None
    return ResolvedFile(split, cached, entry.sha256, url)


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


def load_split(
    dataset: DatasetSpec, split: str, mirror: Path | None = None
) -> tuple[list[dict[str, Any]], ResolvedFile]:
    resolved = fetch_split(dataset, split, mirror)
    return read_jsonl(resolved.path), resolved
