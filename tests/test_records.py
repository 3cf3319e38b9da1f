"""Versioned records (:mod:`harness.records`): one wording for a validation error, one path from an older version
to the current model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import HarnessError
from harness.records import Versions, first_error


class Thing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2] = 2
    name: str
    size: int = 0


def _v1_to_v2(raw: dict[str, object]) -> dict[str, object]:
    """Version 2 renamed ``title`` to ``name``."""
    out = {k: v for k, v in raw.items() if k != "title"}
    return {**out, "name": raw.get("title", "")}


VERSIONS = Versions("thing", 2, {1: _v1_to_v2}, unversioned=1)


def test_the_first_error_is_one_line_naming_its_key() -> None:
    with pytest.raises(ValidationError) as err:
        Thing.model_validate({"size": "x\ny", "colour": 1})
    line = first_error(err.value)
    assert line.startswith("name: missing required key (and 2 more)")
    with pytest.raises(ValidationError) as err:
        Thing.model_validate({"name": "a", "size": "big"})
    assert first_error(err.value, show_input=True) == (
        "size: Input should be a valid integer, unable to parse string as an integer (got 'big')"
    )


def test_an_older_record_is_upgraded_and_a_newer_one_refused(tmp_path: Path) -> None:
    assert VERSIONS.parse({"schema_version": 1, "title": "t"}, Thing, "f").name == "t"
    assert VERSIONS.parse({"title": "u"}, Thing, "f").name == "u"  # written before records had a version
    assert VERSIONS.upgrade({"schema_version": "1", "title": "v"}, "f") == {"schema_version": "2", "name": "v"}
    with pytest.raises(HarnessError, match=r"^f: thing: written by a newer harness \(schema_version 3;"):
        VERSIONS.parse({"schema_version": 3}, Thing, "f")
    with pytest.raises(HarnessError, match=r"^f: thing: unknown schema_version 0"):
        VERSIONS.parse({"schema_version": 0}, Thing, "f")
    with pytest.raises(HarnessError, match=r"^f: run state: version: missing required key"):
        Versions("run state", 2, key="version").parse({}, Thing, "f")
    with pytest.raises(HarnessError, match=r"^f: thing: schema_version: not an integer: True"):
        VERSIONS.parse({"schema_version": True}, Thing, "f")
    with pytest.raises(HarnessError, match=r"^f: thing: size: Input should be a valid integer"):
        VERSIONS.parse({"name": "a", "size": "x"}, Thing, "f")
    path = tmp_path / "thing.json"
    path.write_text(json.dumps({"schema_version": 2, "name": "w"}))
    assert VERSIONS.read(path, Thing).name == "w"
    path.write_text("{")
    with pytest.raises(HarnessError, match="thing is not valid JSON"):
        VERSIONS.read(path, Thing)
    with pytest.raises(HarnessError, match="cannot read thing"):
        VERSIONS.read(tmp_path / "missing.json", Thing)


def test_json_lines_skip_a_cut_line_and_name_a_bad_one() -> None:
    whole = [json.dumps({"schema_version": 2, "name": n}).encode() for n in ("a", "b")]
    cut = whole[1][:9] + "é".encode()[:1]  # a write that ended inside a character
    data = whole[0] + b"\n" + cut + b"\n" + whole[1] + b"\n" + b"\n" + b'{"title": "c"}'
    assert [t.name for t in VERSIONS.parse_lines(data, Thing, "f.jsonl")] == ["a", "b", "c"]
    bad = data + b'\n{"schema_version": 2, "size": 1}\n'
    with pytest.raises(HarnessError, match=r"^f.jsonl:6: thing: name: missing required key$"):
        VERSIONS.parse_lines(bad, Thing, "f.jsonl")
    with pytest.raises(HarnessError, match=r"^f.jsonl: thing: name: missing required key$"):
        VERSIONS.parse_lines(bad, Thing, "f.jsonl", numbered=False)
