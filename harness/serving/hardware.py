"""The machine the models run on: its CPU, memory and GPUs, and the precision ``native`` picks for it.

The ``native`` precision of a spec is bfloat16 where the hardware computes it natively, else float32.

A CPU with bf16 arithmetic (AVX512-BF16 or AMX on x86, BF16 on Arm) runs bf16 matrix products in hardware: on such a
2-core machine the smoke profile's 20 evaluation rollouts took 0.55-0.67 of float32's time, its GRPO steps 0.83-1.03
(``bench/cpu_precision.py``; so the smoke profile serves in ``native`` and trains in float32). A CPU without it
emulates bf16 and runs several times slower than float32, whose kernels every CPU has. A GPU server keeps vLLM's
``auto`` (the checkpoint's own dtype). The value chosen is recorded in the manifest.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

NATIVE = "native"
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""``/proc/cpuinfo`` flags of bf16 arithmetic: x86 (``flags``) and Arm (``Features``)."""


def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this machine's CPU does bf16 arithmetic in hardware (False where it cannot tell)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return bool(BF16_FLAGS & set(value.split()))
    return False


def cpu_dtype(precision: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``native`` for a CPU: bfloat16 or float32; any other value as it is."""
    if precision != NATIVE:
        return precision
    return "bfloat16" if native_bf16(cpuinfo) else "float32"


def serving_dtype(dtype: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The ``--dtype`` for vLLM: ``native`` is :func:`cpu_dtype` on a machine without a GPU, else ``auto``."""
    if dtype != NATIVE:
        return dtype
    return "auto" if gpu_names() else cpu_dtype(dtype, cpuinfo)


def _cpuinfo(cpuinfo: Path) -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo`` (empty where it cannot be read)."""
    out: dict[str, str] = {}
    try:
        text = cpuinfo.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile", "sve", "bf16", "asimd")
"""The instruction-set features that decide which CPU kernels run (and so the bits of a CPU training step)."""


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    info = _cpuinfo(cpuinfo)
    return info.get("model name") or platform.processor() or platform.machine()


def cpu_identity(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU as precisely as a run needs to tell two machines apart: model name, family/model/stepping and the
    instruction-set features its kernels use (``Intel(R) Xeon(R) Processor [6/207/2: avx2 avx512f amx_bf16]``)."""
    info = _cpuinfo(cpuinfo)
    name = info.get("model name") or platform.processor() or platform.machine()
    numbers = "/".join(info.get(k, "?") for k in ("cpu family", "model", "stepping"))
    flags = set((info.get("flags") or info.get("Features") or "").split())
    features = " ".join(f for f in ISA_FLAGS if f in flags)
    return f"{name} [{numbers}: {features or 'no listed features'}]" if info else name


def hardware(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """One line: CPU count and identity, memory, GPUs (by name)."""
    parts = [f"{os.cpu_count()}x {cpu_identity(cpuinfo)}"]
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        parts.append(f"{pages / 2**30:.0f} GiB")
    except (ValueError, OSError):
        pass
    names = gpu_names()
    parts.append("gpu: " + (", ".join(names) if names else "none"))
    return "; ".join(parts)


def gpu_names(proc: Path = Path("/proc/driver/nvidia/gpus")) -> list[str]:
    """The machine's NVIDIA GPUs as its driver lists them (``nvidia-smi``, else the driver's ``/proc`` files): what
    the machine has, whichever environment or container runs the model. Without a driver, none. (Asking torch
    instead would take a second and a few hundred MB in this process, and answer for this environment's build.)"""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
        if out.returncode == 0:
            return [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    names = []
    for info in sorted(proc.glob("*/information")):
        with contextlib.suppress(OSError):
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    names.append(line.split(":", 1)[1].strip())
    return names
