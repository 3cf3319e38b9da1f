"""The manifest's backend, serving and resources sections are typed records that write back what was recorded:
every committed manifest's sections read and re-encode unchanged, ``{}`` stays "none"."""

from __future__ import annotations

import json

from results_factories import make_row

from harness.results.store.codec import decode_manifest, encode_manifest
from harness.results.store.manifest import Manifest, ServingRecord
from support import REPO

SECTIONS = ("backend", "serving", "resources")


def test_every_committed_manifest_keeps_its_sections() -> None:
    paths = sorted((REPO / "results").glob("*/manifests/*.json"))
    assert paths
    for path in paths:
        raw = json.loads(path.read_bytes())
        again = json.loads(encode_manifest(decode_manifest(path.read_bytes(), str(path)), str(path)))
        for section in SECTIONS:
            assert again[section] == raw.get(section, {}), (path, section)


def test_the_sections_read_as_records_and_write_as_given() -> None:
    docker = {
        "name": "docker",
        "engine": {"version": "27.1", "api_version": "1.46"},
        "images": {"cpu": {"ref": "harness-cpu:dev", "id": "sha256:ab", "digest": "sha256:ab", "tags": []}},
    }
    serving = ServingRecord(dtype="float32", starts=2).model_dump(mode="json")
    manifest = Manifest.for_row(make_row("r1"))
    raw = {**manifest.to_json(), "backend": docker, "serving": serving}
    read = Manifest.model_validate(raw)
    assert read.backend is not None and read.backend.images["cpu"].id == "sha256:ab"
    assert read.serving is not None and read.serving.starts == 2 and read.resources is None
    written = read.to_json()
    assert (written["backend"], written["serving"], written["resources"]) == (docker, serving, {})
