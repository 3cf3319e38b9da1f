"""Shared fixtures: the repository's paths, the data mirror, and the prepared smoke model."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import MATH_SPEC, data_mirror


@pytest.fixture(scope="session")
def mirror() -> Path:
    found = data_mirror()
    if found is None:
        pytest.skip("no offline copy of the math data (set HARNESS_DATA_MIRROR)")
    return found


@pytest.fixture(scope="session")
def smoke_model() -> Path:
    """The converted SmolLM2 checkpoint (converted once into the shared cache, as `make bench-math` does)."""
    from harness.models import prepare_model
    from harness.spec import load_spec

    return prepare_model(load_spec(MATH_SPEC, "smoke").model)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Results and artifacts in a temporary folder."""
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "artifacts"))
    return tmp_path
