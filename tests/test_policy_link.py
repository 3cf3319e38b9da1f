"""`.cache/models/policy`: the link to the prepared policy model that compose.yaml serves by default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.paths import link_policy


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "cache" / "models" / "SmolLM2-abc-qwen2_5"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    return tmp_path / "cache"


def test_link_is_relative_and_follows_the_newest_model(cache: Path) -> None:
    link = link_policy(cache / "models" / "SmolLM2-abc-qwen2_5")
    assert link == cache / "models" / "policy"
    assert os.readlink(link) == "SmolLM2-abc-qwen2_5" and (link / "config.json").is_file()
    other = cache / "models" / "Other-def"
    other.mkdir()
    assert link_policy(other) == link and os.readlink(link) == "Other-def"


def test_an_empty_folder_left_by_docker_is_replaced_a_full_one_is_kept(cache: Path) -> None:
    policy = cache / "models" / "policy"
    policy.mkdir()  # what Docker makes of a missing bind source
    assert link_policy(cache / "models" / "SmolLM2-abc-qwen2_5") == policy and policy.is_symlink()
    policy.unlink()
    policy.mkdir()
    (policy / "config.json").write_text("{}")  # a user's own checkpoint: never touched
    assert link_policy(cache / "models" / "SmolLM2-abc-qwen2_5") is None
    assert not policy.is_symlink() and (policy / "config.json").exists()


def test_models_outside_the_cache_are_not_linked(cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert link_policy(outside) is None
    assert not (cache / "models" / "policy").exists()
