"""The CPU model server's executor: the model in vLLM's engine process (the harness's default) against vLLM's own
CPU default, a separate worker process fed through a shared-memory queue (``VLLM_ENABLE_V1_MULTIPROCESSING=1``).

Measured in the same run, interleaved (A B, B A, ...) so that load on a shared machine hits both sides alike, on
the smoke profile's checkpoint and serving arguments (``harness.serving.server.launch``):

* start: from the launch to the first ``200`` on ``/v1/models``;
* decode: eight concurrent chat requests of exactly ``--tokens`` tokens each (``ignore_eos``, greedy), the wall
  time until all have answered -- the shape of the smoke evaluation's eight concurrent rollouts.

Prints min / median per side and the ratios (harness default / vLLM default; below 1 is faster).

Run: ``python bench/cpu_executor.py [--repeat 2] [--tokens 128]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SIDES = {"in-engine (harness default)": "0", "worker process (vLLM's CPU default)": "1"}


async def decode(base_url: str, model: str, tokens: int, concurrency: int = 8) -> float:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count from 1 to 200, one number per line."}],
        "max_tokens": tokens,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    async with httpx.AsyncClient(timeout=600) as client:
        start = time.perf_counter()
        answers = await asyncio.gather(
            *(client.post(base_url + "/chat/completions", json=body) for _ in range(concurrency))
        )
        took = time.perf_counter() - start
    for r in answers:
        r.raise_for_status()
        assert r.json()["usage"]["completion_tokens"] == tokens, r.json()["usage"]
    return took


def one(checkpoint: Path, flag: str, tmp: Path, tokens: int) -> tuple[float, float]:
    from harness.rollout.loading import open_benchmark
    from harness.serving.server import launch

    spec, _, _ = open_benchmark("math", "smoke")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = flag  # server_env() keeps what the environment says
    server = launch(checkpoint, spec.model.name, spec.serving, tmp / f"vllm-{flag}-{time.time_ns()}.log")
    try:
        server.wait_ready(spec.serving.startup_timeout_s)
        ready = time.monotonic() - server.launched_at
        return ready, asyncio.run(decode(server.endpoint.base_url, server.endpoint.model, tokens))
    finally:
        server.stop()
        os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)


def fmt(values: list[float]) -> str:
    return f"min {min(values):5.1f} s  median {statistics.median(values):5.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from harness.assets.models import prepare_model
    from harness.rollout.loading import open_benchmark

    checkpoint = prepare_model(open_benchmark("math", "smoke")[0].model)
    figures: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in SIDES}
    with tempfile.TemporaryDirectory(prefix="cpu-executor-") as tmp_name:
        for r in range(args.repeat):
            names = list(SIDES) if r % 2 == 0 else list(reversed(SIDES))
            for name in names:
                ready, took = one(checkpoint, SIDES[name], Path(tmp_name), args.tokens)
                figures[name][0].append(ready)
                figures[name][1].append(took)
                print(f"  round {r + 1} {name}: start {ready:.1f} s, 8 x {args.tokens} tokens {took:.1f} s", flush=True)
    print(f"cpu executor: the smoke model server on this machine, {args.repeat} rounds (min / median)")
    for name, (ready, took) in figures.items():
        print(f"  {name:38} start {fmt(ready)}   decode {fmt(took)}")
    ours, theirs = figures[next(iter(SIDES))], figures[list(SIDES)[1]]
    start_ratio = statistics.median(ours[0]) / statistics.median(theirs[0])
    decode_ratio = statistics.median(ours[1]) / statistics.median(theirs[1])
    print(f"  ratio (harness default / vLLM's CPU default): start {start_ratio:.2f}, decode {decode_ratio:.2f}")
    if args.json:
        sides = {name: {"start_s": ready, "decode_s": took} for name, (ready, took) in figures.items()}
        out = {"sides": sides, "tokens": args.tokens, "start_ratio": start_ratio, "decode_ratio": decode_ratio}
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
