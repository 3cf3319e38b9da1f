"""How fast this machine is right now: memory read bandwidth and float32 matrix arithmetic, in a few seconds.

A shared virtual machine's speed drifts: on the 2-core machine these benchmarks were written on, the same warm
smoke run took from 139 s to 660 s within one day, and its decoding (which reads every weight once per token) is
bound by memory bandwidth. ``bench/run_all.py`` measures both figures at the start and at the end of every run and
writes them beside the results, so a summary can be read against the machine it ran on; ratios measured within one
script stay the figures to compare.

Run: ``python bench/machine_speed.py`` (prints the figures as JSON).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

READ_MIB = 256
"""The buffer read for bandwidth: well beyond any CPU cache."""
MATMUL_N = 1024


def _median_s(work: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def probe(repeat: int = 5) -> dict[str, Any]:
    """Memory read bandwidth (GB/s, summing a buffer far larger than the caches) and float32 matrix-multiply rate
    (GFLOP/s, ``MATMUL_N`` square), each the median of ``repeat`` passes, with every core torch uses."""
    import torch

    buffer = torch.ones(READ_MIB * 2**20 // 4)
    buffer.sum()  # pages touched before timing
    read_s = _median_s(buffer.sum, repeat)
    a, b = torch.randn(MATMUL_N, MATMUL_N), torch.randn(MATMUL_N, MATMUL_N)
    a @ b
    matmul_s = _median_s(lambda: a @ b, repeat)
    return {
        "threads": torch.get_num_threads(),
        "memory_read_gb_s": round(buffer.numel() * 4 / read_s / 1e9, 2),
        "matmul_gflop_s": round(2 * MATMUL_N**3 / matmul_s / 1e9, 1),
    }


def describe(figures: dict[str, Any]) -> str:
    return (
        f"memory read {figures['memory_read_gb_s']:.1f} GB/s, float32 matmul {figures['matmul_gflop_s']:.0f} "
        f"GFLOP/s ({figures['threads']} threads)"
    )


def measure() -> dict[str, Any] | None:
    """:func:`probe` in a child process (the caller stays free of torch); None if it fails."""
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1])) if done.returncode == 0 else None
    except (ValueError, IndexError):
        return None


if __name__ == "__main__":
    print(json.dumps(probe()))
