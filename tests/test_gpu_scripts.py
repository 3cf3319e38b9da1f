"""scripts/gpu-wheels.sh -> scripts/gpu-install.sh, for real, on locks of the GPU set's layout but a few small
packages (the GPU set itself is several GB): hash-checked download, the sdist built into a wheel, the parts,
the --require-hashes install, the machine's entries left out, the printed `export` lines and the `harness`
command. Needs the package index (pip download); skipped without it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# name==version [hashes of every file PyPI has for it], as `uv pip compile --generate-hashes` writes them.
LOCKS = {
    "gpu.lock": ["six==1.17.0", "antlr4-python3-runtime==4.9.3", "nvidia-nvtx==13.0.85"],
    "gpu-calculator.lock": ["httpx-sse==0.4.3"],
    "gpu-convert.lock": ["tenacity==9.1.4"],
}


# uv's words when it cannot reach an index at all (as opposed to an index that answers with an error)
NO_INDEX = re.compile(r"dns error|tcp connect error|error sending request|Connection refused|Network is unreachable|"
                      r"timed out|Temporary failure in name resolution|failed to lookup address")  # fmt: skip


def _uv() -> str | None:
    found = shutil.which("uv") or str(Path(os.sys.executable).with_name("uv"))
    return found if Path(found).exists() else None


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed")
    locks = tmp_path_factory.mktemp("locks")
    for name, pins in LOCKS.items():
        (locks / f"{name}.in").write_text("\n".join(pins) + "\n")
        proc = subprocess.run([uv, "pip", "compile", f"{name}.in", "--no-deps", "--generate-hashes", "-q", "-o", name],
                              cwd=locks, capture_output=True, text=True, timeout=300)  # fmt: skip
        if proc.returncode != 0 and NO_INDEX.search(proc.stderr):
            pytest.skip(f"no package index: {proc.stderr[-300:]}")
        assert proc.returncode == 0, proc.stderr[-3000:]  # an index that answers: any other failure is one
    (locks / "gpu-h200.txt").write_text("six==1.17.0\n")
    out = tmp_path_factory.mktemp("parts")
    # BFCL's checker set: a pins file like locks/bfcl.txt (no hashes) and the package its data comes from
    (locks / "bfcl.txt").write_text("# pins\ntenacity==9.1.4\nidna==3.10\n")  # the data pin too, as in the lock
    env = dict(os.environ, GPU_LOCK_DIR=str(locks), PART_MIB="1", BFCL="1", BFCL_PINS=str(locks / "bfcl.txt"))
    env["BFCL_DATA"] = "idna==3.10"
    proc = subprocess.run([str(ROOT / "scripts" / "gpu-wheels.sh"), str(out)], env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 pins left to the machine's torch" in proc.stdout and "2 BFCL checker wheels" in proc.stdout
    return locks, out


def test_parts_hold_the_locks_and_verify(parts: tuple[Path, Path]) -> None:
    _, out = parts
    assert (out / "SHA256SUMS").read_text().count("part_") == len(list(out.glob("part_*"))) >= 1
    listing = subprocess.run(f"cat {out}/part_* | tar tf -", shell=True, capture_output=True, text=True).stdout
    assert "locks/gpu.lock\n" in listing and "locks/gpu.lock.carried" in listing
    assert "sdist-wheels/antlr4_python3_runtime-4.9.3-" in listing
    assert "wheels/six-1.17.0-" in listing and "nvidia_nvtx" not in listing  # the machine's CUDA wheel stays out
    assert "bfcl-wheels/tenacity-9.1.4-" in listing and "bfcl-wheels/idna-3.10-" in listing
    assert "locks/bfcl-wheels.sha256" in listing


def test_install_from_the_locks(parts: tuple[Path, Path], tmp_path: Path) -> None:
    locks, out = parts
    prefix = tmp_path / "prefix"
    # The machine's Python: here the harness's own environment (it has the CLI's dependencies the small set lacks).
    proc = subprocess.run([str(ROOT / "scripts" / "gpu-install.sh"), str(out), str(prefix)], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHON=os.sys.executable))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    exports = proc.stdout.strip().splitlines()
    assert len(exports) == 5 and all(line.startswith("export ") for line in exports)
    assert f"HARNESS_ENV_BFCL={prefix}/envs/bfcl" in proc.stdout
    assert f"HARNESS_PACKAGE_LOCK={prefix}/locks/gpu.lock" in proc.stdout
    assert (prefix / "locks" / "gpu.lock").read_bytes() == (locks / "gpu.lock").read_bytes()
    assert (prefix / "site" / "six.py").exists() and (prefix / "site" / "antlr4").is_dir()
    assert list((prefix / "calculator-site").glob("httpx_sse*")) and list((prefix / "convert-site").glob("tenacity"))
    # The printed environment gives a `harness` command that runs this checkout with the installed set.
    env_out = subprocess.run(["bash", "-c", f'{proc.stdout}\ncommand -v harness; python3 -c "import six, antlr4"'],
                             capture_output=True, text=True)  # fmt: skip
    assert env_out.returncode == 0 and env_out.stdout.split()[0] == str(prefix / "bin" / "harness"), env_out.stderr
    harness = subprocess.run(["bash", "-c", f"{proc.stdout}\nharness --help"], capture_output=True, text=True)
    assert harness.returncode == 0 and "validate" in harness.stdout, harness.stderr[-2000:]
    # BFCL's checker runs isolated (-I) in its own environment; the harness finds the data package's metadata.
    checker = subprocess.run([str(prefix / "envs" / "bfcl" / "bin" / "python"), "-I", "-c", "import tenacity, idna"],
                             capture_output=True, text=True)  # fmt: skip
    assert checker.returncode == 0, checker.stderr
    data = subprocess.run(["bash", "-c", f"{proc.stdout}\npython3 -c 'import importlib.metadata as m; "
                           "print(m.version(\"idna\"))'"], capture_output=True, text=True)  # fmt: skip
    assert data.stdout.strip() == "3.10", data.stderr


def test_the_bfcl_data_pin_is_the_specs() -> None:
    """gpu-wheels.sh's default BFCL_DATA is the release the bfcl spec reads its data from."""
    source = re.search(r"source: package://(\S+?)/", (ROOT / "benchmarks" / "bfcl" / "spec.yaml").read_text())
    assert source and f"BFCL_DATA:-{source.group(1)}" in (ROOT / "scripts" / "gpu-wheels.sh").read_text()


def test_a_tampered_wheel_is_refused(parts: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = parts
    bad = tmp_path / "bad"
    bad.mkdir()
    subprocess.run(f"cat {out}/part_* | tar xf - -C {bad}", shell=True, check=True)
    wheel = next((bad / "wheels").glob("six-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    subprocess.run(f"tar cf - -C {bad} . | split -b 1m -d -a 2 - {bad}/part_ && cd {bad} && sha256sum part_* "
                   "> SHA256SUMS", shell=True, check=True)  # fmt: skip
    proc = subprocess.run([str(ROOT / "scripts" / "gpu-install.sh"), str(bad), str(tmp_path / "p")],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode != 0 and "hash" in proc.stderr.lower(), proc.stderr[-2000:]


def test_packing_without_bfcl_says_so_and_succeeds(parts: tuple[Path, Path], tmp_path: Path) -> None:
    """Without BFCL=1 there is no checker folder to count: the script still ends with its summary and exit 0."""
    locks, _ = parts
    env = {k: v for k, v in os.environ.items() if k not in ("BFCL", "BFCL_PINS", "BFCL_DATA")}
    env.update(GPU_LOCK_DIR=str(locks), PART_MIB="1")
    out = tmp_path / "parts"
    proc = subprocess.run([str(ROOT / "scripts" / "gpu-wheels.sh"), str(out)], env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 BFCL checker wheels" in proc.stdout and (out / "SHA256SUMS").exists()
    listing = subprocess.run(f"cat {out}/part_* | tar tf -", shell=True, capture_output=True, text=True).stdout
    assert "bfcl-wheels/" not in listing and "locks/gpu.lock\n" in listing
