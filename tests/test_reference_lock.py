"""The reference stack's lock (docker/requirements/reference.*, docs/reference-stack.md) is what its inputs say:
every top-level pin is locked at its version with hashes, the forced pin agrees with it, and no entry is unhashed."""

from __future__ import annotations

import re
from pathlib import Path

REQ = Path(__file__).resolve().parents[1] / "docker" / "requirements"


def pins(path: Path) -> dict[str, str]:
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    return {norm(a): b for a, b in re.findall(r"^([A-Za-z0-9][\w.-]*)==([^\s\\;]+)", path.read_text(), re.M)}


def test_every_top_level_pin_is_locked_at_its_version() -> None:
    wanted, locked = pins(REQ / "reference.in"), pins(REQ / "reference.lock")
    assert {"agentlightning", "verl", "vllm", "torch", "agent-framework-core"} <= set(wanted)
    assert {name: locked.get(name) for name in wanted} == wanted


def test_the_forced_pin_is_the_inputs() -> None:
    forced, wanted = pins(REQ / "reference-overrides.txt"), pins(REQ / "reference.in")
    assert forced and all(wanted[name] == version for name, version in forced.items())


def test_every_locked_entry_has_a_hash() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", (REQ / "reference.lock").read_text().split("\n", 2)[2])
    unhashed = [e.split()[0] for e in entries if "==" in e and "--hash=sha256:" not in e]
    assert len(entries) > 200 and not unhashed
