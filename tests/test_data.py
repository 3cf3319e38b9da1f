"""Datasets: verified against the pinned sha256, cached, and never used on a mismatch."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.data import fetch_split, load_split, read_jsonl
from harness.errors import DataError
from harness.spec import DatasetSpec, load_spec
from support import MATH_SPEC


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_DATA_MIRROR", raising=False)
    return tmp_path / "cache"


def _spec(source: str, sha: str) -> DatasetSpec:
    return DatasetSpec.model_validate(
        {"name": "toy", "source": source, "splits": {"test": {"path": "t.jsonl", "sha256": sha}}}
    )


def test_math_splits_from_mirror(mirror: Path, cache: Path) -> None:
    spec = load_spec(MATH_SPEC)
    rows, resolved = load_split(spec.dataset, "test", mirror)
    assert len(rows) == 20
    assert set(rows[0]) == {"id", "question", "chain", "result", "source"}
    assert resolved.origin.startswith("mirror:")
    train, _ = load_split(spec.dataset, "train", mirror)
    assert len(train) == 64
    again = fetch_split(spec.dataset, "test", mirror)
    assert again.origin == "cache"


def test_hash_mismatch_is_an_error_and_nothing_is_cached(tmp_path: Path, cache: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "t.jsonl").write_text('{"id": 1}\n')
    wrong = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(DataError, match="sha256 mismatch"):
        fetch_split(_spec("https://example.invalid/data", wrong), "test", mirror)
    assert not any(cache.rglob("t.jsonl"))


def test_corrupted_cache_is_refetched(tmp_path: Path, cache: Path) -> None:
    body = b'{"id": 1}\n'
    sha = hashlib.sha256(body).hexdigest()
    mirror = tmp_path / "mirror"
    (mirror / "toy").mkdir(parents=True)
    (mirror / "toy" / "t.jsonl").write_bytes(body)
    spec = _spec("https://example.invalid/data", sha)
    first = fetch_split(spec, "test", mirror)
    first.path.write_bytes(b"tampered\n")
    second = fetch_split(spec, "test", mirror)
    assert second.origin.startswith("mirror:")
    assert second.path.read_bytes() == body


def test_file_url_source(tmp_path: Path, cache: Path) -> None:
    body = b'{"id": "a"}\n{"id": "b"}\n'
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "t.jsonl").write_bytes(body)
    spec = _spec((tmp_path / "src").as_uri(), hashlib.sha256(body).hexdigest())
    rows, resolved = load_split(spec, "test")
    assert [r["id"] for r in rows] == ["a", "b"]
    assert resolved.origin.startswith("file://")


def test_unreachable_source_names_the_mirror_option(cache: Path) -> None:
    spec = _spec("http://127.0.0.1:9/none", "0" * 64)
    with pytest.raises(DataError, match="HARNESS_DATA_MIRROR"):
        fetch_split(spec, "test")


def test_bad_jsonl_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"ok": 1}\n{broken\n')
    with pytest.raises(DataError, match=r"x.jsonl:2: invalid JSON"):
        read_jsonl(p)
