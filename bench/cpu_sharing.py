"""Two CPU-bound processes on the same cores: a trainer beside the model server, under OpenMP's default wait
policy, the passive one and the harness's short spin (``harness/serving/cores.py``).

Measured in the same run, for each policy (OpenMP's default; ``OMP_WAIT_POLICY=PASSIVE``; the harness's
``GOMP_SPINCOUNT``; more spin counts with ``--spin``; the order alternates with ``--repeat``), on the smoke
profile's checkpoint and serving arguments (``harness.serving.server.launch``):

* decode alone: eight concurrent chat requests of exactly ``--tokens`` tokens (greedy, ``ignore_eos``), the wall
  time until all have answered (median of two rounds);
* train alone: ``--steps`` forward/backward/AdamW steps of the smoke model on a 4 x 128-token batch, in the
  harness environment's Python -- the kernels of a GRPO update -- while the server idles;
* both at once: the same training while the decode rounds repeat; the training's time and the median round.

Prints each figure and the ratios of each policy to OpenMP's default (below 1 is faster).

Run: ``python bench/cpu_sharing.py [--repeat 1] [--steps 8] [--tokens 64] [--spin 2000,5000]`` (``--spin``: more
spin counts to measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from cpu_executor import decode  # noqa: E402

POLICIES = {
    "OpenMP default": {"OMP_WAIT_POLICY": ""},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": ""},
    "short spin (harness default)": {},
}
"""Environment per policy; empty values are removed (OpenMP's own default); {} is what harness.serving.cores sets."""

TRAIN = """
import sys, time, torch
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
ids = torch.randint(0, model.config.vocab_size, (4, 128))
start = time.perf_counter()
for _ in range(int(sys.argv[2])):
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
print(time.perf_counter() - start)
"""


def start_training(checkpoint: Path, steps: int) -> subprocess.Popen[str]:
    from harness.serving.cores import share_cores

    env = share_cores(dict(os.environ))
    python = REPO / ".venv" / "bin" / "python"
    return subprocess.Popen(
        [str(python), "-c", TRAIN, str(checkpoint), str(steps)], env=env, stdout=subprocess.PIPE, text=True
    )


def finished(proc: subprocess.Popen[str]) -> float:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the training stand-in failed (exit {proc.returncode})")
    return float(out.strip().splitlines()[-1])


def one(checkpoint: Path, policy: dict[str, str], tmp: Path, steps: int, tokens: int) -> dict[str, float]:
    from harness.rollout.loading import open_benchmark
    from harness.serving.server import launch

    spec, _, _ = open_benchmark("math", "smoke")
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        os.environ.pop(name, None)
    os.environ.update(policy)  # harness.serving.cores: an empty OMP_WAIT_POLICY leaves OpenMP's own default
    server = launch(checkpoint, spec.model.name, spec.serving, tmp / f"vllm-{time.time_ns()}.log")
    try:
        server.wait_ready(spec.serving.startup_timeout_s)
        url, model = server.endpoint.base_url, server.endpoint.model
        decode_alone = statistics.median(asyncio.run(decode(url, model, tokens)) for _ in range(2))
        train_alone = finished(start_training(checkpoint, steps))
        training = start_training(checkpoint, steps)
        rounds = []
        while training.poll() is None or not rounds:
            rounds.append(asyncio.run(decode(url, model, tokens)))
        return {
            "decode_alone_s": decode_alone,
            "train_alone_s": train_alone,
            "decode_beside_s": statistics.median(rounds),
            "train_beside_s": finished(training),
        }
    finally:
        server.stop()
        for name in policy:
            os.environ.pop(name, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--spin", default="", help="also measure these GOMP_SPINCOUNT values (comma-separated)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    for count in filter(None, args.spin.split(",")):
        POLICIES[f"spin {count}"] = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": count}

    from harness.assets.models import prepare_model
    from harness.rollout.loading import open_benchmark

    checkpoint = prepare_model(open_benchmark("math", "smoke")[0].model)
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in POLICIES}
    with tempfile.TemporaryDirectory(prefix="cpu-sharing-") as tmp_name:
        for r in range(args.repeat):
            names = list(POLICIES) if r % 2 == 0 else list(reversed(POLICIES))
            for name in names:
                f = one(checkpoint, POLICIES[name], Path(tmp_name), args.steps, args.tokens)
                figures[name].append(f)
                alone = f"alone train {f['train_alone_s']:.1f} s, decode {f['decode_alone_s']:.1f} s"
                beside = f"beside each other train {f['train_beside_s']:.1f} s, decode {f['decode_beside_s']:.1f} s"
                print(f"  round {r + 1} {name}: {alone}; {beside}", flush=True)
    med = {name: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for name, fs in figures.items()}
    print(
        f"cpu sharing: {args.steps} training steps and 8 x {args.tokens}-token decodes on {os.cpu_count()} cores, "
        f"{args.repeat} round(s) (median)"
    )
    for name, m in med.items():
        print(
            f"  {name:27} alone: train {m['train_alone_s']:6.1f} s  decode {m['decode_alone_s']:5.1f} s   "
            f"beside: train {m['train_beside_s']:6.1f} s  decode {m['decode_beside_s']:5.1f} s"
        )
    base = med[next(iter(POLICIES))]
    ratios = {name: {k: m[k] / base[k] for k in base} for name, m in med.items() if m is not base}
    for name, r in ratios.items():
        print(
            f"  ratio ({name} / OpenMP default): "
            + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.2f}" for k, v in r.items())
        )
    if args.json:
        out = {"policies": figures, "steps": args.steps, "tokens": args.tokens, "ratios": ratios}
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
