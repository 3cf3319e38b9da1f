"""Shared fixtures (the prepared smoke model, isolated result folders) and the rule for skipped tests.

A test that cannot run here skips with its reason. Under CI (``HARNESS_CI=1``, which `.ci/run` sets) every test is
meant to run, so a skip fails the run instead, naming the reason. With ``HARNESS_SKIP_LOG=FILE`` each skip (or
skip turned failure) is appended to FILE as one line, ``nodeid<TAB>reason``; `.ci/run` prints the count and the
reasons from it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import MATH_SPEC

CI = os.environ.get("HARNESS_CI") == "1"


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    log = os.environ.get("HARNESS_SKIP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{report.nodeid}\t{reason}{' (a failure under HARNESS_CI=1)' if CI else ''}\n")
    if CI:
        report.outcome = "failed"
        report.longrepr = f"skipped under HARNESS_CI=1, where every test is meant to run: {reason}"


@pytest.fixture(scope="session")
def smoke_model() -> Path:
    """The converted SmolLM2 checkpoint (converted once into the shared cache, as `make bench-math` does)."""
    from harness.assets.models import prepare_model
    from harness.spec import load_spec

    return prepare_model(load_spec(MATH_SPEC, "smoke").model)


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Results and artifacts in a temporary folder."""
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "artifacts"))
    return tmp_path
