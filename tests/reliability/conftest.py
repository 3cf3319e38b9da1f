"""The reliability suite prints its figures (faults injected, runs recovered, rows lost, ...) after the tests."""

from __future__ import annotations

from typing import Any

from support_reliability import FIGURES


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = FIGURES.lines()
    if lines:
        terminalreporter.section("reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
