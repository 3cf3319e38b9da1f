"""How the processes the harness starts share the CPU's cores.

PyTorch's CPU kernels (and vLLM's, which pins its OpenMP threads to cores) run on GNU OpenMP, whose threads spin
at each barrier for a while before they sleep. That is the fastest choice for a process alone on its cores and a
disaster for two beside each other: each spins on cores the other needs. On 2 cores, a GRPO step of the smoke
model (tests/test_trl_engine.py) beside a decoding model server took 492 s instead of 54, and the server decoded
20x slower. With ``OMP_WAIT_POLICY=PASSIVE`` a waiting thread sleeps at once: the same pair took 78 s, the server
decoded 1.6x slower; each alone runs 5-30 % slower than with spinning (two one-round runs of
``bench/cpu_sharing.py``, which measures both).

Two runs at once, an evaluation beside a training run, the model server beside the trainer: the harness sets the
policy for every model server and trainer it starts unless the environment names one (``OMP_WAIT_POLICY=ACTIVE``
keeps threads spinning; set but empty, ``OMP_WAIT_POLICY=``, leaves OpenMP's own default).
"""

from __future__ import annotations

OMP_WAIT_POLICY = "PASSIVE"


def share_cores(env: dict[str, str]) -> dict[str, str]:
    """``env`` with OpenMP's passive wait policy, unless it already names a policy (empty: OpenMP's default)."""
    policy = env.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    if not policy.strip():
        del env["OMP_WAIT_POLICY"]
    return env
