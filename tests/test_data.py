"""Datasets: verified against the pinned sha256, cached, and never used on a mismatch."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.assets.data import fetch_split, load_split, read_jsonl, rows_sha256
from harness.errors import DataError, SpecError
from harness.run.record import _split_record
from harness.spec import DatasetSpec, load_spec
from support import MATH_SPEC, REPO


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HARNESS_DATA_MIRROR", raising=False)
    return tmp_path / "cache"


def _spec(source: str, sha: str) -> DatasetSpec:
    return DatasetSpec.model_validate(
        {"name": "toy", "source": source, "splits": {"test": {"path": "t.jsonl", "sha256": sha}}}
    )


def test_math_splits_ship_with_the_benchmark(tmp_path: Path, cache: Path) -> None:
    """The 84 rows are read from benchmarks/math/data (a mirror, even one holding other bytes, is not consulted)."""
    spec = load_spec(MATH_SPEC)
    decoy = tmp_path / "mirror" / "math"
    decoy.mkdir(parents=True)
    (decoy / "test.jsonl").write_text('{"id": 1}\n')
    rows, resolved = load_split(spec.dataset, "test", tmp_path / "mirror")
    assert len(rows) == 20
    assert set(rows[0]) == {"id", "question", "chain", "result", "source"}
    assert resolved.origin == "benchmark:data"
    train, _ = load_split(spec.dataset, "train")
    assert len(train) == 64
    again = fetch_split(spec.dataset, "test")
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


def _benchmark_spec(tmp_path: Path, source: str, path: str = "t.jsonl") -> Path:
    """A copy of the arith spec (outside its folder) with another data source and train file."""
    folder = tmp_path / "bench"
    folder.mkdir(exist_ok=True)
    spec = (REPO / "benchmarks" / "arith" / "spec.yaml").read_text()
    spec = spec.replace("source: data\n", f"source: {source!r}\n")
    spec = spec.replace("train: {path: train.jsonl", f"train: {{path: {path!r}")
    (folder / "spec.yaml").write_text(spec)
    return folder / "spec.yaml"


@pytest.mark.parametrize("source", ["data", "./data", "data/", "./data/."])
def test_relative_source_is_read_from_the_benchmark_folder(tmp_path: Path, cache: Path, source: str) -> None:
    body = b'{"id": "a"}\n'
    spec_file = _benchmark_spec(tmp_path, source, "t.jsonl")
    (spec_file.parent / "data").mkdir(exist_ok=True)
    (spec_file.parent / "data" / "t.jsonl").write_bytes(body)
    spec_file.write_text(
        spec_file.read_text().replace(
            "41c140258a1e6b7660ad988f7fd9a943f308cc47445b2f7af8485eebe6098f89", hashlib.sha256(body).hexdigest()
        )
    )
    dataset = load_spec(spec_file).dataset
    assert dataset.folder == spec_file.parent
    rows, resolved = load_split(dataset, "train", mirror=tmp_path / "no-mirror")
    assert rows == [{"id": "a"}] and resolved.origin == "benchmark:data"
    assert fetch_split(dataset, "train").origin == "cache"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("../data", "must stay inside the benchmark's folder"),
        ("data/../../x", "must stay inside the benchmark's folder"),
        ("/srv/data", "must be relative to the benchmark's folder"),
        ("C:/data", "must be relative to the benchmark's folder"),
        ("", "must not be empty"),
        ("ftp://example.org/data", "http(s)://, file:// or package:// URL, or a folder"),
    ],
)
def test_bad_relative_source_is_a_one_line_spec_error(tmp_path: Path, source: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_benchmark_spec(tmp_path, source))
    assert message in str(err.value) and "dataset.source" in str(err.value) and "\n" not in str(err.value)


def test_relative_source_errors(tmp_path: Path, cache: Path) -> None:
    unbound = _spec("data", "0" * 64)
    with pytest.raises(DataError, match="is relative but has no folder"):
        fetch_split(unbound, "test")
    unbound.bind_folder(tmp_path)
    with pytest.raises(DataError, match=r"t.jsonl: not found \(dataset toy, source 'data'\)"):
        fetch_split(unbound, "test")
    escaping = DatasetSpec.model_validate(
        {"name": "toy", "source": "data", "splits": {"test": {"path": "../../x.jsonl", "sha256": "0" * 64}}}
    )
    escaping.bind_folder(tmp_path / "bench")
    with pytest.raises(DataError, match="outside the benchmark folder"):
        fetch_split(escaping, "test")


def test_a_seeded_split_is_identified_by_its_selected_rows(cache: Path) -> None:
    """The manifest names a split by the hash of the rows it selected: BFCL's seeded 140/260 split of one file
    gives two disjoint selections whose hashes differ, and the same selection hashes the same every time."""
    spec = load_spec(REPO / "benchmarks" / "bfcl" / "spec.yaml", "learn-cpu")
    train, train_file = load_split(spec.dataset, "simple_python-train")
    test, test_file = load_split(spec.dataset, "simple_python-test")
    assert (len(train), len(test)) == (140, 260) and train_file.sha256 == test_file.sha256
    assert not {r["id"] for r in train} & {r["id"] for r in test}
    assert rows_sha256(train) != rows_sha256(test)
    assert rows_sha256(load_split(spec.dataset, "simple_python-train")[0]) == rows_sha256(train)
    assert rows_sha256(list(reversed(train))) != rows_sha256(train)  # the order is part of the split
    record = _split_record(spec, "simple_python-test", len(test), rows_sha256(test))
    assert record.select == {"shuffle_seed": 7, "start": 0.35, "end": 1.0}
    assert (record.rows, record.rows_sha256) == (260, rows_sha256(test))


def test_a_seeded_split_of_listed_ids(tmp_path: Path, cache: Path) -> None:
    """``select`` with both ids and a seed: the rows listed under the key (in the listing's order), then the seeded
    shuffle slice of those; the two halves cover the listed rows once each, and the other rows never."""
    import json
    import random

    from harness.spec.schema import IdsShuffleSelect

    data = tmp_path / "bench" / "data"
    data.mkdir(parents=True)
    rows = [{"id": f"r{i}"} for i in range(30)]
    listed = [f"r{i}" for i in (29, 3, 17, 8, 11, 0, 21, 5, 14, 26)]
    (data / "t.json").write_text(json.dumps(rows))
    (data / "ids.json").write_text(json.dumps({"base": listed, "other": ["r1"]}))

    def digest(name: str) -> str:
        return hashlib.sha256((data / name).read_bytes()).hexdigest()

    select = {"ids_file": "ids.json", "ids_sha256": digest("ids.json"), "key": "base", "shuffle_seed": 42}
    splits = {
        name: {"path": "t.json", "sha256": digest("t.json"), "select": {**select, "start": lo, "end": hi}}
        for name, lo, hi in (("train", 0.0, 0.5), ("test", 0.5, 1.0))
    }
    spec = DatasetSpec.model_validate({"name": "toy", "source": "data", "format": "json", "splits": splits})
    spec.bind_folder(tmp_path / "bench")
    assert isinstance(spec.splits["train"].select, IdsShuffleSelect)
    order = list(range(len(listed)))
    random.Random(42).shuffle(order)
    train, _ = load_split(spec, "train")
    test, _ = load_split(spec, "test")
    assert [r["id"] for r in train] == [listed[i] for i in order[:5]]
    assert [r["id"] for r in test] == [listed[i] for i in order[5:]]
