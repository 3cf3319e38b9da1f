"""The harness's verl engine beside verl's own trainer on the same work: seconds per training step and rollout tokens
per second, from one GPU machine.

Two arms, one after the other on the same GPU:

* **harness**: ``harness run math --profile speed-h200 --skip-baseline`` (the tuned H200 recipe for 6 GRPO
  steps, no validation), stopped with Ctrl-C's signal once it prints that training is done: its evaluation is
  not what is compared, and the run folder keeps the training metrics (the run is left resumable, with no row).
  The benchmark's own Agent Framework agent runs in the harness's agent loop, with the MCP calculator, every LLM
  call traced to tokens.
* **verl**: ``verl.trainer.main_ppo`` with the same VERL configuration (written by the harness arm:
  ``train/verl-config.json``: model, batch, group size, lengths, learning rate, seed, steps, checkpoint at the end),
  changed only where the agent is: verl's own multi-turn ``tool_agent`` loop with the hermes tool parser, the
  calculator as a verl function tool (``verl_native/calculator_tool.py``: the same package's ``evaluate``), the
  same system prompt and tasks (prompt rows built from the harness arm's parquet), and the benchmark's reward
  through ``custom_reward_function`` (``verl_native/reward.py``).

Both arms log verl's own per-step metrics (``VERL_FILE_LOGGER_PATH``). Reported: the median over the steps that are
neither the first (warm-up) nor the last (checkpoint save) of seconds per step and of rollout tokens per second
(response tokens of all samples / ``timing_s/gen``), the ratios harness / verl (target >= 0.9 for tokens per second;
verl / harness for seconds per step, so that >= 0.9 reads the same way), every ``timing_s/*`` phase side by side
(where a difference goes), and both arms' mean response length and reward (the models learn differently, so lengths
differ: tokens per second is the fairer figure). Where verl logs each step's tokens, also the work per step, all
tokens per second over the timed steps pooled, each phase's seconds per 1,000 tokens and each step's figures, and
the findings in words: whether the target is met, and where a slower step goes (more work, or a phase slower per
token).

Run on a GPU machine with the GPU set installed (``scripts/gpu-install.sh``):
``python bench/verl_speed.py [--profile speed-h200] [--seed 0] [--harness-run RUN_ID]`` (``--harness-run`` reuses a
finished harness arm). Writes ``bench/results/verl-speed-<time>.md`` and ``.json``, with both arms' verl metrics
in ``bench/results/verl-speed-<time>/``; ``--report <time>`` writes that report again from those metrics.
``--verl-only`` runs the verl arm alone, its configuration built as the harness's verl worker builds it
(:func:`harness_config`), and writes its figures to ``artifacts/verl-speed-<time>/verl-only.json``: a check that the
arm runs and how long it takes, never a comparison (that needs both arms on one machine).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NATIVE = Path(__file__).resolve().parent / "verl_native"
sys.path.insert(0, str(REPO))

RUN_ID = re.compile(r"\brun (math-\d{8}T\d{6}Z-[0-9a-f]{6})\b")
TRAINED = re.compile(r"^\s*trained \d+ steps in ", re.M)
"""The harness's line once training is done (its reporter's ``TrainingDone``)."""


def artifacts() -> Path:
    return Path(os.environ.get("HARNESS_ARTIFACTS", REPO / "artifacts"))


def run_logged(cmd: list[str], log: Path, label: str, stop_at: re.Pattern[str] | None = None) -> tuple[int, float, str]:
    """Run ``cmd`` with its output to ``log`` and a line on the terminal every minute; (exit status, wall s, text).

    With ``stop_at``: once the log matches it, the command gets SIGINT (the harness stops its children and exits)
    and its exit status is reported as 0."""
    start = time.monotonic()
    stopped = False
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        while proc.poll() is None:
            time.sleep(5)
            if int(time.monotonic() - start) % 60 < 5:
                print(f"  {label}: {time.monotonic() - start:.0f} s, log {log}", flush=True)
            if stop_at and not stopped and stop_at.search(log.read_text(errors="replace")):
                print(f"  {label}: done at {time.monotonic() - start:.0f} s; stopping it", flush=True)
                proc.send_signal(signal.SIGINT)
                stopped = True
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return 0 if stopped else proc.returncode, time.monotonic() - start, log.read_text(errors="replace")


def harness_arm(profile: str, seed: int, out: Path) -> str:
    cmd = [sys.executable, "-m", "harness.cli", "run", "math", "--profile", profile, "--seed", str(seed)]
    cmd += ["--skip-baseline", "--limit", "2", "--trials", "1", "--backend", "local"]
    print("harness arm:", " ".join(cmd[1:]), flush=True)
    code, wall, text = run_logged(cmd, out / "harness-arm.log", "harness arm", stop_at=TRAINED)
    found = RUN_ID.search(text)
    if code != 0 or not found:
        sys.exit(f"verl_speed: the harness arm failed (exit {code}); its log: {out / 'harness-arm.log'}")
    print(f"harness arm: {found.group(1)} in {wall:.0f} s", flush=True)
    return found.group(1)


def harness_config(profile: str, seed: int, model_path: str, train: Path) -> tuple[dict[str, Any], Path]:
    """The harness arm's VERL configuration and training parquet, written as the harness's verl worker writes them
    (its ``write_data`` and ``verl_run_config``), for ``model_path``, without training."""
    from harness.engines.jobs import VerlJob
    from harness.engines.verl.engine import VerlConfig, verl_run_config
    from harness.engines.verl.worker import write_data
    from harness.spec import load_spec

    spec_path = REPO / "benchmarks" / "math" / "spec.yaml"
    spec = load_spec(spec_path, profile)
    assert spec.training is not None
    config = VerlConfig.model_validate(spec.training.config)
    job = VerlJob(
        benchmark=spec.name, profile=profile, spec_path=spec_path, base_model=model_path, output_dir=train, seed=seed
    )
    train_file, _, _ = write_data(job, config, train)
    cfg = verl_run_config(
        config,
        model_path=model_path,
        train_file=str(train_file),
        val_file=None,
        output_dir=train,
        agent_loop_config=str(train / "agent-loops.yaml"),
        seed=seed,
        ray_address=None,
        env_vars={"TOKENIZERS_PARALLELISM": "false"},
    )
    return cfg, train_file


def prepared_model(profile: str) -> str:
    """The profile's model checkpoint and data, fetched and prepared as ``harness prepare`` does (cached)."""
    from harness.assets.data import fetch_split
    from harness.assets.models import prepare_model
    from harness.spec import load_spec

    spec = load_spec(REPO / "benchmarks" / "math" / "spec.yaml", profile)
    for split in spec.dataset.splits:
        fetch_split(spec.dataset, split, None)
    return str(prepare_model(spec.model))


def native_rows(parquet: Path, instructions: str) -> list[dict[str, Any]]:
    """The harness arm's tasks as verl tool-agent rows: system prompt and question, the answer as ground truth."""
    import pandas as pd

    from harness.engines.verl.rows import TaskRow

    rows = []
    for row in pd.read_parquet(parquet).to_dict("records"):
        info = TaskRow.read(row["extra_info"])
        rows.append(
            {
                "data_source": "math",
                "agent_name": "tool_agent",
                "prompt": [
                    {"role": "system", "content": instructions},
                    {"role": "user", "content": info.prompt},
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": info.answer},
                "extra_info": {"index": info.index, "task_id": info.task_id},
            }
        )
    return rows


def native_config(harness_config: dict[str, Any], out: Path, max_turns: int) -> dict[str, Any]:
    """The harness arm's VERL configuration with verl's own agent, tool, data and reward in place of the harness's."""
    cfg = copy.deepcopy(harness_config)
    rollout = cfg["actor_rollout_ref"]["rollout"]
    rollout["agent"] = {"num_workers": rollout["agent"]["num_workers"], "default_agent_loop": "tool_agent"}
    rollout["multi_turn"] = {
        **rollout.get("multi_turn", {}),
        "enable": True,
        "function_tool_path": str(NATIVE / "calculator_tool.py"),
        "max_assistant_turns": max_turns,
    }
    # The harness's agent asks for at most evaluation.max_tokens per LLM call; verl's loop bounds the whole
    # response instead (the same data.max_response_length in both arms).
    cfg["data"]["train_files"] = str(out / "native" / "train.parquet")
    cfg["data"]["val_files"] = str(out / "native" / "train.parquet")
    reward = {"path": str(NATIVE / "reward.py"), "name": "compute_score"}
    cfg.setdefault("reward", {})["custom_reward_function"] = reward
    trainer = cfg["trainer"]
    trainer["default_local_dir"] = str(out / "native" / "verl-checkpoints")
    trainer["experiment_name"] = f"{trainer['experiment_name']}-verl-native"
    trainer["logger"] = ["console", "file"]
    env = cfg["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]
    for key in ("HARNESS_VERL_TRACE", "TENSORBOARD_DIR"):
        env.pop(key, None)
    env["VERL_FILE_LOGGER_PATH"] = str(out / "native" / "verl-metrics.jsonl")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return cfg


def run_native(config_path: Path) -> int:
    """Child: compose VERL's ``ppo_trainer`` config with ``config_path`` and run ``main_ppo`` (as the harness does)."""
    import hydra
    import verl.trainer.main_ppo as main_ppo
    from omegaconf import OmegaConf

    run_config = json.loads(config_path.read_text())
    os.environ["VERL_FILE_LOGGER_PATH"] = run_config["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"][
        "VERL_FILE_LOGGER_PATH"
    ]
    with hydra.initialize_config_dir(config_dir=str(Path(main_ppo.__file__).parent / "config"), version_base=None):
        cfg = hydra.compose(config_name="ppo_trainer")
    OmegaConf.set_struct(cfg, False)
    main_ppo.main(OmegaConf.merge(cfg, OmegaConf.create(run_config)))
    return 0


def steps_of(metrics: Path) -> list[dict[str, float]]:
    out = []
    for line in metrics.read_text().splitlines():
        entry = json.loads(line)
        data = entry.get("data", {})
        if "timing_s/step" in data:
            out.append({"step": entry["step"], **{k: v for k, v in data.items() if isinstance(v, int | float)}})
    return out


def _pooled(steps: list[dict[str, float]], key: str, per: list[float]) -> float | None:
    """Seconds of ``key`` per 1,000 of ``per`` (one count per step), summed over ``steps``; None where a step lacks
    it."""
    if not steps or any(key not in s for s in steps) or sum(per) <= 0:
        return None
    return 1000.0 * sum(s[key] for s in steps) / sum(per)


def summary(steps: list[dict[str, float]], samples_per_step: int) -> dict[str, Any]:
    """Medians over the steps between the first and the last, with rollout tokens per second per step; where verl
    logs each step's tokens (``perf/total_num_tokens``), the work per step and each phase's seconds per 1,000 tokens
    over those steps (``timing_s/gen`` per 1,000 response tokens, the other phases per 1,000 of all tokens)."""
    for s in steps:
        s["rollout_tokens_per_s"] = s["response_length/mean"] * samples_per_step / s["timing_s/gen"]
    middle = steps[1:-1] if len(steps) > 2 else steps
    keys = sorted({k for s in middle for k in s if k.startswith("timing_s/")})
    med = {k: statistics.median(s[k] for s in middle if k in s) for k in keys}
    out: dict[str, Any] = {
        "steps": len(steps),
        "steps_timed": [int(s["step"]) for s in middle],
        "s_per_step": statistics.median(s["timing_s/step"] for s in middle),
        "rollout_tokens_per_s": statistics.median(s["rollout_tokens_per_s"] for s in middle),
        "throughput_tokens_per_s_per_gpu": statistics.median(s["perf/throughput"] for s in middle),
        "response_length_mean": statistics.mean(s["response_length/mean"] for s in steps),
        "reward_mean": statistics.mean(s.get("critic/score/mean", float("nan")) for s in steps),
        "num_turns_mean": statistics.mean(s.get("num_turns/mean", float("nan")) for s in steps),
        "timing_medians": med,
        "total_s": sum(s["timing_s/step"] for s in steps),
    }
    if all("perf/total_num_tokens" in s for s in middle):
        tokens = [s["perf/total_num_tokens"] for s in middle]
        responses = [s["response_length/mean"] * samples_per_step for s in middle]
        out["tokens_per_step_mean"] = statistics.mean(tokens)
        out["tokens_per_s_pooled"] = sum(tokens) / sum(s["timing_s/step"] for s in middle)
        per_1k = {k: _pooled(middle, k, responses if k == "timing_s/gen" else tokens) for k in keys}
        out["s_per_1k_tokens"] = {k: v for k, v in per_1k.items() if v is not None}
        out["per_step"] = [
            {
                "step": int(s["step"]),
                "tokens": int(s["perf/total_num_tokens"]),
                "response_length_mean": s["response_length/mean"],
                "response_length_max": s.get("response_length/max", float("nan")),
                "gen_s": s["timing_s/gen"],
                "step_s": s["timing_s/step"],
            }
            for s in steps
        ]
    return out


TARGET = 0.9
"""The harness's throughput at least this share of verl's own."""


def _num(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def findings(h: dict[str, Any], v: dict[str, Any]) -> list[str]:
    """What the figures say about the target, and where a slower step goes."""
    ratio_tok = h["rollout_tokens_per_s"] / v["rollout_tokens_per_s"]
    ratio_all = h["throughput_tokens_per_s_per_gpu"] / v["throughput_tokens_per_s_per_gpu"]
    met = ratio_tok >= TARGET and ratio_all >= TARGET
    out = [
        f"Target (the harness at least {TARGET}x verl's own throughput): **{'met' if met else 'not met'}** "
        f"(rollout tokens / s {ratio_tok:.2f}, all tokens / s / GPU {ratio_all:.2f})."
    ]
    ratio_step = v["s_per_step"] / h["s_per_step"]
    if ratio_step >= TARGET or "s_per_1k_tokens" not in h or "s_per_1k_tokens" not in v:
        return out
    per_token = {
        k: v["s_per_1k_tokens"][k] / h["s_per_1k_tokens"][k]
        for k in sorted(set(h["s_per_1k_tokens"]) & set(v["s_per_1k_tokens"]))
        if k != "timing_s/step" and h["s_per_1k_tokens"][k] > 0
    }
    work = h["tokens_per_step_mean"] / v["tokens_per_step_mean"]
    gaps = {k: h["timing_medians"][k] - v["timing_medians"].get(k, 0.0) for k in h["timing_medians"]}
    widest = max((k for k in gaps if k != "timing_s/step"), key=lambda k: gaps[k])
    slower = [k for k, r in per_token.items() if r < TARGET]
    text = (
        f"Seconds per step: the harness's steps take longer (verl / harness {ratio_step:.2f}), most of it in "
        f"`{widest}` (+{gaps[widest]:.1f} s a step). Its steps hold {work:.2f}x verl's tokens (its agent writes "
        f"{h['response_length_mean']:.0f} tokens a rollout over {h['num_turns_mean']:.1f} turns, verl's "
        f"{v['response_length_mean']:.0f} over {v['num_turns_mean']:.1f}); "
    )
    if slower:
        text += "per token, slower in " + ", ".join(f"`{k}` ({per_token[k]:.2f})" for k in slower) + "."
    else:
        lowest = min(per_token, key=lambda k: per_token[k])
        text += f"per token no phase is slower (the lowest ratio, verl / harness: `{lowest}` {per_token[lowest]:.2f})."
    out.append(text)
    return out


def report(h: dict[str, Any], v: dict[str, Any], meta: dict[str, Any]) -> str:
    ratio_tok = h["rollout_tokens_per_s"] / v["rollout_tokens_per_s"]
    ratio_step = v["s_per_step"] / h["s_per_step"]
    lines = [
        "# The harness's verl engine beside verl's own trainer",
        "",
        f"{meta['when']}, {meta['gpu']}, commit {meta['commit']}; `python bench/verl_speed.py --profile "
        f"{meta['profile']} --seed {meta['seed']}`. Harness run {meta['harness_run']}. Both arms: the same VERL "
        f"configuration, {h['steps']} GRPO steps of {meta['samples_per_step']} samples; medians over steps "
        f"{h['steps_timed'][0]}-{h['steps_timed'][-1]} (not the first, warm-up, nor the last, checkpoint save).",
        "",
        *[line for finding in findings(h, v) for line in (finding, "")],
        "| | harness (Agent Framework agent, MCP calculator) | verl (tool_agent loop, function tool) | ratio |",
        "|---|---|---|---|",
        f"| rollout tokens / s | {h['rollout_tokens_per_s']:.0f} | {v['rollout_tokens_per_s']:.0f} | "
        f"{ratio_tok:.2f} (harness / verl) |",
        f"| s / step | {h['s_per_step']:.1f} | {v['s_per_step']:.1f} | {ratio_step:.2f} (verl / harness) |",
        f"| all tokens / s / GPU (verl's `perf/throughput`) | {h['throughput_tokens_per_s_per_gpu']:.0f} | "
        f"{v['throughput_tokens_per_s_per_gpu']:.0f} | "
        f"{h['throughput_tokens_per_s_per_gpu'] / v['throughput_tokens_per_s_per_gpu']:.2f} |",
    ]
    if "tokens_per_step_mean" in h and "tokens_per_step_mean" in v:
        lines += [
            f"| all tokens / s, the timed steps pooled | {h['tokens_per_s_pooled']:.0f} | "
            f"{v['tokens_per_s_pooled']:.0f} | {h['tokens_per_s_pooled'] / v['tokens_per_s_pooled']:.2f} |",
            f"| tokens per step (prompts and responses), mean | {h['tokens_per_step_mean']:.0f} | "
            f"{v['tokens_per_step_mean']:.0f} | {h['tokens_per_step_mean'] / v['tokens_per_step_mean']:.2f} |",
        ]
    lines += [
        f"| response length, mean tokens | {h['response_length_mean']:.0f} | {v['response_length_mean']:.0f} | |",
        f"| turns per rollout, mean | {h['num_turns_mean']:.2f} | {v['num_turns_mean']:.2f} | |",
        f"| training reward, mean | {h['reward_mean']:.3f} | {v['reward_mean']:.3f} | |",
        f"| all steps, s | {h['total_s']:.0f} | {v['total_s']:.0f} | |",
        "",
        "Phases (median seconds per step; where a difference goes):",
        "",
        "| phase | harness | verl |",
        "|---|---|---|",
    ]
    for key in sorted(set(h["timing_medians"]) | set(v["timing_medians"])):
        hv, vv = h["timing_medians"].get(key), v["timing_medians"].get(key)
        lines.append(f"| `{key}` | {_num(hv, 2)} | {_num(vv, 2)} |")
    if "s_per_1k_tokens" in h and "s_per_1k_tokens" in v:
        lines += [
            "",
            "Phases per token (seconds per 1,000 tokens over the timed steps: `gen` per 1,000 response tokens, the "
            "others per 1,000 of all tokens; verl / harness above 1 where the harness is faster):",
            "",
            "| phase | harness | verl | verl / harness |",
            "|---|---|---|---|",
        ]
        for key in sorted(set(h["s_per_1k_tokens"]) & set(v["s_per_1k_tokens"])):
            hv, vv = h["s_per_1k_tokens"][key], v["s_per_1k_tokens"][key]
            ratio = f"{vv / hv:.2f}" if hv > 0 else ""
            lines.append(f"| `{key}` | {hv:.4f} | {vv:.4f} | {ratio} |")
        lines += [
            "",
            "Each step (tokens of the step; its rollouts' mean and longest response; generation and step seconds):",
            "",
            "| step | harness tokens | mean / longest | gen s | step s "
            "| verl tokens | mean / longest | gen s | step s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for a, b in zip(h["per_step"], v["per_step"], strict=False):
            lines.append(
                f"| {a['step']} | {a['tokens']} | {a['response_length_mean']:.0f} / {a['response_length_max']:.0f} | "
                f"{a['gen_s']:.1f} | {a['step_s']:.1f} | {b['tokens']} | {b['response_length_mean']:.0f} / "
                f"{b['response_length_max']:.0f} | {b['gen_s']:.1f} | {b['step_s']:.1f} |"
            )
    return "\n".join(lines) + "\n"


def metrics_folder(stamp: str) -> Path:
    """Where a report keeps both arms' verl metrics, one line a step, beside its ``.md`` and ``.json``."""
    return REPO / "bench" / "results" / f"verl-speed-{stamp}"


def render(stamp: str, meta: dict[str, Any]) -> str:
    """The report of ``stamp`` from the metrics kept beside it: written as ``.md`` and ``.json``."""
    folder = metrics_folder(stamp)
    per_step = int(meta["samples_per_step"])
    h = summary(steps_of(folder / "harness-verl-metrics.jsonl"), per_step)
    v = summary(steps_of(folder / "verl-verl-metrics.jsonl"), per_step)
    text = report(h, v, meta)
    results = folder.parent
    (results / f"verl-speed-{stamp}.md").write_text(text)
    (results / f"verl-speed-{stamp}.json").write_text(
        json.dumps({"meta": meta, "harness": h, "verl": v}, indent=2) + "\n"
    )
    return text


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "native":
        return run_native(Path(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="speed-h200")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--harness-run", help="reuse this finished harness arm")
    parser.add_argument("--verl-only", action="store_true", help="run the verl arm alone (a check, no comparison)")
    parser.add_argument(
        "--report", metavar="STAMP", help="write the report of an earlier run again from the metrics kept beside it"
    )
    args = parser.parse_args()
    if args.report:
        kept = REPO / "bench" / "results" / f"verl-speed-{args.report}.json"
        if not kept.exists() or not metrics_folder(args.report).is_dir():
            sys.exit(f"verl_speed: no report {args.report} with its metrics under bench/results")
        print(render(args.report, json.loads(kept.read_text())["meta"]))
        return 0

    from harness.spec import load_spec

    spec = load_spec(REPO / "benchmarks" / "math" / "spec.yaml", args.profile)
    if spec.training is None or spec.training.engine != "verl":
        sys.exit(f"verl_speed: profile {args.profile!r} does not train with verl")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = artifacts() / f"verl-speed-{stamp}"
    (out / "native").mkdir(parents=True)
    if args.verl_only:
        print("verl arm alone: preparing the model and the harness arm's configuration", flush=True)
        run_id = "none (--verl-only)"
        model = prepared_model(args.profile)
        harness_cfg, train_parquet = harness_config(args.profile, args.seed, model, out / "train")
    else:
        run_id = args.harness_run or harness_arm(args.profile, args.seed, out)
        train = artifacts() / "runs" / run_id / "train"
        harness_cfg = json.loads((train / "verl-config.json").read_text())
        train_parquet = train / "data" / "train.parquet"

    import pandas as pd

    pd.DataFrame(native_rows(train_parquet, spec.agent.instructions)).to_parquet(out / "native" / "train.parquet")
    config = native_config(harness_cfg, out, spec.agent.max_turns)
    config_path = out / "native" / "verl-config.json"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    print("verl arm: verl.trainer.main_ppo with its tool_agent loop", flush=True)
    code, wall, _ = run_logged([sys.executable, __file__, "native", str(config_path)], out / "verl-arm.log", "verl arm")
    if code != 0:
        sys.exit(f"verl_speed: the verl arm failed (exit {code}); its log: {out / 'verl-arm.log'}")
    print(f"verl arm: {wall:.0f} s", flush=True)

    rollout = harness_cfg["actor_rollout_ref"]["rollout"]
    per_step = int(harness_cfg["data"]["train_batch_size"]) * int(rollout["n"])
    v = summary(steps_of(out / "native" / "verl-metrics.jsonl"), per_step)
    if args.verl_only:
        alone = {"profile": args.profile, "seed": args.seed, "wall_s": round(wall, 1), "verl": v}
        (out / "verl-only.json").write_text(json.dumps(alone, indent=2) + "\n")
        print(json.dumps(alone, indent=2))
        return 0
    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    meta = {
        "when": stamp,
        "gpu": gpu or "no GPU name",
        "commit": commit.stdout.strip(),
        "profile": args.profile,
        "seed": args.seed,
        "harness_run": run_id,
        "samples_per_step": per_step,
    }
    folder = metrics_folder(stamp)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(train / "verl-metrics.jsonl", folder / "harness-verl-metrics.jsonl")
    shutil.copyfile(out / "native" / "verl-metrics.jsonl", folder / "verl-verl-metrics.jsonl")
    print(render(stamp, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
