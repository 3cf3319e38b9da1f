"""How the processes the harness starts share the CPU's cores.

PyTorch's CPU kernels (and vLLM's, which pins its OpenMP threads to cores) run on GNU OpenMP, whose threads spin at
each barrier for a while (300,000 spins, some 3 ms) before they sleep. That is the fastest choice for a process
alone on its cores and a disaster for two beside each other: each spins on cores the other needs. On 2 cores, a GRPO
step of the smoke model (tests/test_trl_engine.py) beside a decoding model server took 492 s instead of 54, and the
server decoded 20x slower. With ``OMP_WAIT_POLICY=PASSIVE`` a waiting thread sleeps at once: the same pair took 78
s, but each alone ran 5-30 % slower than with spinning, and the smoke run's GRPO steps 15-30 % slower.

The harness sets a short spin for every model server and trainer it starts: ``GOMP_SPINCOUNT=5000`` (a waiting
thread spins some 50 microseconds, then sleeps; libgomp's count wins over the wait policy, which stays ``PASSIVE``
for other OpenMP runtimes). ``bench/cpu_sharing.py --spin 2000,5000`` on 2 cores, against OpenMP's default (4
steps of the training stand-in, 8 x 64-token decodes, one round; below 1 is faster):

| policy | train alone | decode alone | train beside | decode beside |
| --- | --- | --- | --- | --- |
| passive | 1.11 | 1.40 | 0.14 | 0.25 |
| spin 2000 | 0.99 | 1.23 | 0.15 | 0.30 |
| spin 5000 (the harness's) | 0.97 | 1.08 | 0.15 | 0.39 |
| spin 20000 | 0.91 | 0.88 | 0.20 | 0.61 |

Alone, a process runs nearly as fast as with OpenMP's default (passive cost the smoke run's GRPO steps 15-30 %);
beside another, the trainer is as fast as with passive and the decoding 1.5x slower than passive, 2.6x faster than
OpenMP's default.

An environment that names either variable keeps its own choice (``OMP_WAIT_POLICY=ACTIVE`` keeps threads spinning;
set but empty, ``OMP_WAIT_POLICY=`` or ``GOMP_SPINCOUNT=``, leaves OpenMP's own default for it).
"""

from __future__ import annotations

OMP_WAIT_POLICY = "PASSIVE"
GOMP_SPINCOUNT = "5000"
VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def share_cores(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the harness's wait policy and spin count, unless it names either (empty: OpenMP's default)."""
    if not any(name in env for name in VARIABLES):
        env.update(OMP_WAIT_POLICY=OMP_WAIT_POLICY, GOMP_SPINCOUNT=GOMP_SPINCOUNT)
    for name in VARIABLES:
        if name in env and not env[name].strip():
            del env[name]
    return env
