"""``native`` precision: bfloat16 where the CPU computes it in hardware, else float32; auto on a GPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines.trl.engine import TrlGrpoConfig
from harness.serving import hardware as precision
from harness.serving.hardware import cpu_dtype, native_bf16, serving_dtype
from harness.serving.server import vllm_args
from harness.spec import ServingSpec

X86_FLAGS = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 avx avx2 fma avx512f avx512bw avx512vl"
CPUS = {
    "x86 with AMX": f"processor\t: 0\nflags\t\t: {X86_FLAGS} amx_bf16 amx_tile amx_int8\n",
    "x86 with AVX512-BF16": f"processor\t: 0\nflags\t\t: {X86_FLAGS} avx512_bf16 avx512_vnni\n",
    "x86 with AVX512 only": f"processor\t: 0\nflags\t\t: {X86_FLAGS} avx512_vnni\n",
    "Arm with BF16": "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics bf16 i8mm\n",
    "Arm without": "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n",
}
NATIVE = {
    "x86 with AMX": True,
    "x86 with AVX512-BF16": True,
    "x86 with AVX512 only": False,
    "Arm with BF16": True,
    "Arm without": False,
}


@pytest.mark.parametrize("cpu", list(CPUS))
def test_native_follows_the_cpus_bf16_flags(cpu: str, tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(CPUS[cpu])
    assert native_bf16(info) is NATIVE[cpu]
    assert cpu_dtype("native", info) == ("bfloat16" if NATIVE[cpu] else "float32")
    assert cpu_dtype("float32", info) == "float32" and cpu_dtype("bfloat16", info) == "bfloat16"


def test_an_unreadable_cpuinfo_means_float32(tmp_path: Path) -> None:
    assert not native_bf16(tmp_path / "missing") and cpu_dtype("native", tmp_path / "missing") == "float32"


def test_a_server_on_a_gpu_machine_keeps_vllms_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(CPUS["x86 with AVX512 only"])
    monkeypatch.setattr("harness.serving.hardware.gpu_names", lambda: ["NVIDIA H200"])
    assert serving_dtype("native", info) == "auto" and serving_dtype("float32", info) == "float32"
    monkeypatch.setattr("harness.serving.hardware.gpu_names", lambda: [])
    assert serving_dtype("native", info) == "float32"


def test_the_server_is_started_with_the_resolved_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    for bf16 in (True, False):
        monkeypatch.setattr(precision, "native_bf16", lambda *_, bf16=bf16: bf16)
        monkeypatch.setattr("harness.serving.hardware.gpu_names", lambda: [])
        args = vllm_args(Path("/m"), "policy", 8000, ServingSpec(dtype="native"))
        assert args[args.index("--dtype") + 1] == ("bfloat16" if bf16 else "float32")


def test_specs_name_native_precision_for_serving_and_training() -> None:
    assert ServingSpec.model_validate({"dtype": "native"}).dtype == "native"
    assert TrlGrpoConfig.model_validate({"precision": "native"}).precision == "native"
    assert TrlGrpoConfig().precision == "float32"  # the reference behaviour unless a profile asks
    with pytest.raises(ValueError, match="precision"):
        TrlGrpoConfig.model_validate({"precision": "int8"})


def test_a_cpu_server_computes_each_prompt_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """No chunked prefill on a CPU (vLLM's CPU engine dies on seeded sampling in a partly computed prompt:
    tests/test_policy_server.py shows it on a real server); vLLM's default on a GPU, and the spec's own choice wins."""
    monkeypatch.setattr("harness.serving.hardware.gpu_names", lambda: [])
    assert "--no-enable-chunked-prefill" in vllm_args(Path("/m"), "policy", 8000, ServingSpec())
    chosen = ServingSpec(extra_args=["--enable-chunked-prefill=True"])
    assert "--no-enable-chunked-prefill" not in vllm_args(Path("/m"), "policy", 8000, chosen)
    monkeypatch.setattr("harness.serving.hardware.gpu_names", lambda: ["NVIDIA H200"])
    assert "--no-enable-chunked-prefill" not in vllm_args(Path("/m"), "policy", 8000, ServingSpec())


def test_the_first_error_of_a_server_log(tmp_path: Path) -> None:
    from harness.serving.server import first_error

    log = tmp_path / "server.log"
    log.write_text(
        "(APIServer pid=7) WARNING 12-06 03:26:01 [system_utils.py:255] Found ulimit of 20000. This can cause fd"
        " limit errors like `OSError: [Errno 24] Too many open files`.\n"
        "(EngineCore pid=9) ERROR 12-06 03:26:49 [core.py:1512] Traceback (most recent call last):\n"
        '(EngineCore pid=9) ERROR 12-06 03:26:49 [core.py:1512]   File "core.py", line 3502, in _bookkeeping_sync\n'
        "(EngineCore pid=9) ERROR 12-06 03:26:49 [core.py:1512] RuntimeError: CPU Generator does not use offset\n"
        "(APIServer pid=7) ERROR 12-06 03:26:49 [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue.\n"
    )
    assert first_error(log) == "RuntimeError: CPU Generator does not use offset"
    log.write_text("INFO ready\n")
    assert first_error(log) is None and first_error(tmp_path / "missing.log") is None
