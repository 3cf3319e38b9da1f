"""Provenance: a run is dirty when a tracked file changed or a file appeared under benchmarks/; the benchmark
folder's hash follows its files, not git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.run.provenance import folder_hash, git_state
from harness.serving.hardware import gpu_names, hardware


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_untracked_files_under_benchmarks_make_the_run_dirty(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "b").mkdir(parents=True)
    (tmp_path / "benchmarks" / "b" / "spec.yaml").write_text("name: b\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "init")
    sha, dirty = git_state(tmp_path)
    assert len(sha) == 40 and not dirty
    (tmp_path / "notes.txt").write_text("an untracked file elsewhere does not change what runs")
    assert git_state(tmp_path) == (sha, False)
    (tmp_path / "benchmarks" / "b" / "data.json").write_text("[]")
    assert git_state(tmp_path) == (sha, True)


def test_rows_appended_to_the_result_tables_leave_the_run_clean(tmp_path: Path) -> None:
    """`make bench-math` then `make bench-arith` on a clone: the second run's code is still the commit's."""
    (tmp_path / "results" / "math").mkdir(parents=True)
    (tmp_path / "results" / "math" / "runs.csv").write_text("format_version,run_id\n")
    (tmp_path / "harness.py").write_text("x = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "init")
    sha, _ = git_state(tmp_path)
    with (tmp_path / "results" / "math" / "runs.csv").open("a") as table:
        table.write("1,math-1\n")
    (tmp_path / "results" / "math" / "manifests").mkdir()
    (tmp_path / "results" / "math" / "manifests" / "math-1.json").write_text("{}")
    assert git_state(tmp_path) == (sha, False)
    (tmp_path / "harness.py").write_text("x = 2\n")
    assert git_state(tmp_path) == (sha, True)


def test_folder_hash_follows_content_and_names_not_caches(tmp_path: Path) -> None:
    (tmp_path / "benchmark.py").write_text("x = 1\n")
    first = folder_hash(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "benchmark.cpython-311.pyc").write_bytes(b"\0")
    assert folder_hash(tmp_path) == first
    (tmp_path / "benchmark.py").write_text("x = 2\n")
    assert folder_hash(tmp_path) != first
    (tmp_path / "benchmark.py").write_text("x = 1\n")
    (tmp_path / "benchmark.py").rename(tmp_path / "other.py")
    assert folder_hash(tmp_path) != first


def test_gpus_are_read_from_the_driver_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's /proc files name the GPUs when nvidia-smi is not on PATH; no driver, no GPU ("gpu: none",
    which the run comparisons read as a CPU run)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for bus, model in (("0000:0a:00.0", "NVIDIA H200"), ("0000:0b:00.0", "NVIDIA H200")):
        (tmp_path / "gpus" / bus).mkdir(parents=True)
        (tmp_path / "gpus" / bus / "information").write_text(f"Model: \t\t {model}\nIRQ:   \t\t 42\n")
    assert gpu_names(tmp_path / "gpus") == ["NVIDIA H200", "NVIDIA H200"]
    assert gpu_names(tmp_path / "none") == []
    if not Path("/proc/driver/nvidia/gpus").exists():
        assert hardware().endswith("; gpu: none")


def test_the_cpu_is_named_with_its_numbers_and_kernel_features(tmp_path: Path) -> None:
    """Two machines whose model names read the same ("Intel(R) Xeon(R) Processor") differ in family/model/stepping or
    features, which decide the kernels a CPU training step runs."""
    from harness.serving.hardware import cpu_identity, hardware

    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) "
        "Processor\nstepping\t: 2\nflags\t\t: fpu sse4_2 avx2 avx512f amx_bf16 amx_tile\n\nprocessor\t: 1\n"
    )
    assert cpu_identity(info) == "Intel(R) Xeon(R) Processor [6/207/2: avx2 avx512f amx_bf16 amx_tile]"
    assert (
        hardware(info).split("; ")[0].endswith("Intel(R) Xeon(R) Processor [6/207/2: avx2 avx512f amx_bf16 amx_tile]")
    )
