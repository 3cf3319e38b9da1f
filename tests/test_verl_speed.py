"""bench/verl_speed.py: which steps are timed, rollout tokens per second, the ratios' direction, and stopping the
harness arm once it has trained."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import verl_speed


def step(n: int, total: float, gen: float, length: float) -> dict[str, float]:
    return {
        "timing_s/step": total,
        "timing_s/gen": gen,
        "timing_s/update_actor": total - gen,
        "response_length/mean": length,
        "perf/throughput": 1000.0,
        "critic/score/mean": 0.25,
    }


def write_metrics(path: Path, steps: list[dict[str, float]]) -> Path:
    lines = [json.dumps({"step": 0, "data": {"val-core/math/acc/mean@1": 0.3}})]
    lines += [json.dumps({"step": i + 1, "data": s}) for i, s in enumerate(steps)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_first_and_last_steps_are_not_timed_and_validation_lines_are_no_steps(tmp_path: Path) -> None:
    steps = [step(1, 30.0, 20.0, 100), step(2, 10.0, 4.0, 64), step(3, 12.0, 8.0, 64), step(4, 11.0, 2.0, 32)]
    steps.append(step(5, 40.0, 2.0, 64))
    got = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "m.jsonl", steps)), samples_per_step=64)
    assert got["steps"] == 5 and got["steps_timed"] == [2, 3, 4]
    assert got["s_per_step"] == 11.0
    # 64 samples x mean length / generation seconds, per step: 1024, 512, 1024 -> median 1024
    assert got["rollout_tokens_per_s"] == pytest.approx(1024.0)
    assert got["timing_medians"]["timing_s/gen"] == 4.0
    assert got["total_s"] == 103.0


def test_the_ratios_read_the_same_way_above_one_when_the_harness_is_faster(tmp_path: Path) -> None:
    fast = [step(i, 10.0, 5.0, 80) for i in range(1, 6)]
    slow = [step(i, 20.0, 10.0, 80) for i in range(1, 6)]
    h = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "h.jsonl", fast)), 64)
    v = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "v.jsonl", slow)), 64)
    meta = {"when": "T", "gpu": "G", "commit": "c", "profile": "p", "seed": 0, "harness_run": "r"}
    text = verl_speed.report(h, v, {**meta, "samples_per_step": 64})
    assert "| rollout tokens / s | 1024 | 512 | 2.00 (harness / verl) |" in text
    assert "| s / step | 10.0 | 20.0 | 2.00 (verl / harness) |" in text
    assert "| `timing_s/gen` | 5.00 | 10.00 |" in text


def work(n: int, total: float, gen: float, length: float, tokens: int) -> dict[str, float]:
    """A step with verl's per-step token count and its longest response."""
    extra = {"perf/total_num_tokens": tokens, "perf/throughput": tokens / total, "response_length/max": 2 * length}
    return {**step(n, total, gen, length), **extra}


def test_a_slower_step_with_more_work_is_told_apart_from_a_slower_engine(tmp_path: Path) -> None:
    """Same speed per token, twice the tokens per step: the target is met and no phase is slower per token; the
    same work at half the speed names the phase that costs it."""
    meta = {"when": "T", "gpu": "G", "commit": "c", "profile": "p", "seed": 0, "harness_run": "r"}
    meta["samples_per_step"] = 64
    verl = [work(i, 10.0, 5.0, 80, 10_000) for i in range(1, 6)]
    v = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "v.jsonl", verl)), 64)
    more = [work(i, 20.0, 10.0, 160, 20_000) for i in range(1, 6)]
    h = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "h.jsonl", more)), 64)
    assert h["tokens_per_step_mean"] == 20_000 and h["tokens_per_s_pooled"] == 1000.0
    assert h["s_per_1k_tokens"]["timing_s/gen"] == pytest.approx(10.0 / (160 * 64) * 1000)
    assert h["s_per_1k_tokens"]["timing_s/update_actor"] == pytest.approx(0.5)
    text = verl_speed.report(h, v, meta)
    assert "Target (the harness at least 0.9x verl's own throughput): **met** (rollout tokens / s 1.00" in text
    assert "most of it in `timing_s/gen` (+5.0 s a step). Its steps hold 2.00x verl's tokens" in text
    assert "per token no phase is slower" in text
    assert "| `timing_s/update_actor` | 0.5000 | 0.5000 | 1.00 |" in text
    assert "| 3 | 20000 | 160 / 320 | 10.0 | 20.0 | 10000 | 80 / 160 | 5.0 | 10.0 |" in text

    slow = [work(i, 20.0, 5.0, 80, 10_000) for i in range(1, 6)]  # the update takes 15 s instead of 5
    h = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "s.jsonl", slow)), 64)
    text = verl_speed.report(h, v, meta)
    assert "**not met**" in text and "per token, slower in `timing_s/update_actor` (0.33)." in text
    old = [step(i, 20.0, 5.0, 80) for i in range(1, 6)]  # no token counts: the report keeps its first figures
    h = verl_speed.summary(verl_speed.steps_of(write_metrics(tmp_path / "o.jsonl", old)), 64)
    assert "s_per_1k_tokens" not in h and "Phases per token" not in verl_speed.report(h, v, meta)


def test_a_report_is_written_again_from_the_metrics_kept_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(verl_speed, "REPO", tmp_path)
    folder = verl_speed.metrics_folder("20260101T000000Z")
    folder.mkdir(parents=True)
    write_metrics(folder / "harness-verl-metrics.jsonl", [work(i, 10.0, 5.0, 80, 10_000) for i in range(1, 6)])
    write_metrics(folder / "verl-verl-metrics.jsonl", [work(i, 20.0, 10.0, 80, 10_000) for i in range(1, 6)])
    meta = {"when": "20260101T000000Z", "gpu": "G", "commit": "c", "profile": "p", "seed": 0, "harness_run": "r"}
    (folder.parent / "verl-speed-20260101T000000Z.json").write_text(
        json.dumps({"meta": {**meta, "samples_per_step": 64}})
    )
    monkeypatch.setattr(sys, "argv", ["verl_speed.py", "--report", "20260101T000000Z"])
    assert verl_speed.main() == 0
    text = (folder.parent / "verl-speed-20260101T000000Z.md").read_text()
    assert "| s / step | 10.0 | 20.0 | 2.00 (verl / harness) |" in text and text in capsys.readouterr().out
    kept = json.loads((folder.parent / "verl-speed-20260101T000000Z.json").read_text())
    assert kept["meta"]["commit"] == "c" and kept["verl"]["tokens_per_s_pooled"] == 500.0
    monkeypatch.setattr(sys, "argv", ["verl_speed.py", "--report", "20990101T000000Z"])
    with pytest.raises(SystemExit, match="no report 20990101T000000Z with its metrics under bench/results"):
        verl_speed.main()


def test_the_harness_arm_is_stopped_with_sigint_once_training_is_done(tmp_path: Path) -> None:
    """A real child that prints the harness's line and then waits: it gets SIGINT (and records that it did), and
    the arm counts as finished; without the line the child's own exit status stands."""
    child = tmp_path / "child.py"
    child.write_text(
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        f"    pathlib.Path({str(tmp_path / 'got-sigint')!r}).write_text('yes')\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "print('run math-20261207T000000Z-abcdef  benchmark=math', flush=True)\n"
        "print('  trained 6 steps in 151 s; checkpoint 0123456789ab', flush=True)\n"
        "time.sleep(60)\n"
        "sys.exit(3)\n"
    )
    code, wall, text = verl_speed.run_logged(
        [sys.executable, str(child)], tmp_path / "arm.log", "arm", stop_at=verl_speed.TRAINED
    )
    assert code == 0 and wall < 50
    assert (tmp_path / "got-sigint").read_text() == "yes"
    assert verl_speed.RUN_ID.search(text).group(1) == "math-20261207T000000Z-abcdef"

    quiet = tmp_path / "quiet.py"
    quiet.write_text("import sys\nprint('  training step 3', flush=True)\nsys.exit(3)\n")
    code, _, _ = verl_speed.run_logged(
        [sys.executable, str(quiet)], tmp_path / "q.log", "q", stop_at=verl_speed.TRAINED
    )
    assert code == 3


def test_the_verl_arm_alone_gets_the_harness_arms_configuration(tmp_path: Path) -> None:
    """``--verl-only`` builds the harness arm's configuration as the verl worker does: the speed profile's batch,
    group size, steps and model, the 64 training tasks; the verl arm built from it swaps in verl's own agent."""
    cfg, parquet = verl_speed.harness_config("speed-h200", 0, "/model", tmp_path / "train")
    assert parquet.exists()
    assert cfg["actor_rollout_ref"]["model"]["path"] == "/model"
    assert [cfg["data"]["train_batch_size"], cfg["actor_rollout_ref"]["rollout"]["n"]] == [8, 8]
    assert cfg["trainer"]["total_training_steps"] == 6
    rows = verl_speed.native_rows(parquet, "Solve it.")
    assert len(rows) == 64 and rows[0]["prompt"][0] == {"role": "system", "content": "Solve it."}
    native = verl_speed.native_config(cfg, tmp_path, max_turns=5)
    assert native["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "tool_agent"
    assert native["actor_rollout_ref"]["rollout"]["multi_turn"]["max_assistant_turns"] == 5
    assert native["data"]["train_files"] == str(tmp_path / "native" / "train.parquet")
