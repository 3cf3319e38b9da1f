"""scripts/reference-wheels.sh -> scripts/reference-install.sh, for real, on a lock of reference.lock's layout but two
small packages (the set itself is 4.9 GiB): hash-checked download, the sdist-only pin built into a wheel, the
parts, the --require-hashes install into a venv whose interpreter imports them, and a tampered wheel refused.
Needs the package index; skipped without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_gpu_scripts import NO_INDEX, _uv

ROOT = Path(__file__).resolve().parents[1]
PINS = ["six==1.17.0", "antlr4-python3-runtime==4.9.3"]  # antlr4's runtime is one of the lock's two sdist-only pins


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed")
    locks = tmp_path_factory.mktemp("reflock")
    (locks / "reference.in").write_text("\n".join(PINS) + "\n")
    proc = subprocess.run([uv, "pip", "compile", "reference.in", "--no-deps", "--generate-hashes", "-q", "-o",
                           "reference.lock"], cwd=locks, capture_output=True, text=True, timeout=300)  # fmt: skip
    if proc.returncode != 0 and NO_INDEX.search(proc.stderr):
        pytest.skip(f"no package index: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path_factory.mktemp("refparts")
    env = dict(os.environ, REFERENCE_LOCK=str(locks / "reference.lock"), PART_MIB="1")
    proc = subprocess.run([str(ROOT / "scripts" / "reference-wheels.sh"), str(out)], env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 wheels + 1 built from sdists" in proc.stdout, proc.stdout
    return locks, out


def install(parts: Path, prefix: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHON=sys.executable)  # the machine's Python: here the harness's own
    cmd = [str(ROOT / "scripts" / "reference-install.sh"), str(parts), str(prefix)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


def test_parts_hold_the_lock_and_the_built_wheel(parts: tuple[Path, Path]) -> None:
    _, out = parts
    assert (out / "SHA256SUMS").read_text().count("part_") == len(list(out.glob("part_*"))) >= 1
    listing = subprocess.run(f"cat {out}/part_* | tar tf -", shell=True, capture_output=True, text=True).stdout
    assert "wheels/six-1.17.0-" in listing and "sdist-wheels/antlr4_python3_runtime-4.9.3-" in listing
    assert "locks/reference.lock\n" in listing and "locks/sdist-wheels.sha256" in listing


def test_install_makes_a_venv_that_imports_the_set(parts: tuple[Path, Path], tmp_path: Path) -> None:
    locks, out = parts
    proc = install(out, tmp_path / "p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = Path(proc.stdout.strip().splitlines()[-1])
    assert python == tmp_path / "p" / "ref" / "bin" / "python"
    # isolated (-I): the packages come from the venv itself, as the MCP server the sample starts needs
    check = subprocess.run([str(python), "-I", "-c", "import six, antlr4; print(six.__version__)"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0 and check.stdout.strip() == "1.17.0", check.stderr
    assert (tmp_path / "p" / "ref" / "locks" / "reference.lock").read_bytes() == (locks / "reference.lock").read_bytes()


def test_a_tampered_wheel_is_refused(parts: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = parts
    bad = tmp_path / "bad"
    bad.mkdir()
    subprocess.run(f"cat {out}/part_* | tar xf - -C {bad}", shell=True, check=True)
    wheel = next((bad / "wheels").glob("six-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    subprocess.run(f"tar cf - -C {bad} wheels sdist-wheels locks | split -b 1m -d -a 3 - {bad}/part_ && cd {bad} && "
                   "sha256sum part_* > SHA256SUMS", shell=True, check=True)  # fmt: skip
    proc = install(bad, tmp_path / "p")
    assert proc.returncode != 0 and "hash" in proc.stderr.lower(), proc.stderr[-2000:]
