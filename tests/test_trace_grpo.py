"""The trace-grpo engine's parts: GRPO advantages, triplet selection, call attribution, and one real update."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from harness.benchmark.protocol import Episode
from harness.engines.base import TrainRequest
from harness.engines.jobs import Triplet, UpdateJob, write_triplets
from harness.engines.progress import PROGRESS_PREFIX, ProgressRecord, read_progress
from harness.engines.trace.engine import TraceGrpoEngine, group_advantages, select_triplets
from harness.rollout.tracing import Call, TraceStore, TracingTransport, rollout_scope
from harness.run.record import _tensorboard_dir
from support import REPO


def test_group_advantages_are_normalised_per_task() -> None:
    adv = group_advantages({("a", 0): 1.0, ("a", 1): 0.0, ("b", 0): 0.5, ("b", 1): 0.5, ("c", 0): 1.0})
    assert adv[("a", 0)] == pytest.approx(1.0, rel=1e-3) and adv[("a", 1)] == pytest.approx(-1.0, rel=1e-3)
    assert adv[("b", 0)] == adv[("b", 1)] == 0.0  # equal rewards: no signal
    assert adv[("c", 0)] == 0.0  # a group of one
    three = group_advantages({("t", 0): 0.0, ("t", 1): 0.0, ("t", 2): 3.0})
    assert sum(three.values()) == pytest.approx(0.0, abs=1e-9)


def test_select_triplets_takes_largest_advantage_calls() -> None:
    store = TraceStore()
    store.add(("a", 0), Call([1, 2], [3]))
    store.add(("a", 0), Call([1, 2, 3, 4], [5]))
    store.add(("a", 1), Call([1], [9]))
    store.add(("b", 0), Call([7], [8]))
    adv = {("a", 0): 0.5, ("a", 1): -2.0, ("b", 0): 0.0}
    picked = select_triplets(store, adv, limit=2, seed=0)
    assert [t.advantage for t in picked] == [-2.0, 0.5]
    assert [t.rollout for t in picked] == [("a", 1), ("a", 0)]  # b has no signal
    assert len(select_triplets(store, adv, limit=10, seed=0)) == 3


def test_tracing_transport_attributes_calls_to_rollouts() -> None:
    """Concurrent rollouts' calls land under their own keys; token ids are asked for; other routes pass."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx.Response(200, json={"data": []})
        body = json.loads(request.content)
        seen.append(body)
        n = int(body["messages"][0]["content"])
        return httpx.Response(
            200,
            json={"prompt_token_ids": [n, n], "choices": [{"token_ids": [n + 100], "finish_reason": "stop"}]},
        )

    store = TraceStore()

    async def main() -> None:
        async with httpx.AsyncClient(transport=TracingTransport(store, httpx.MockTransport(handler))) as client:

            async def rollout(task: str, n: int) -> None:
                with rollout_scope(task, 0):
                    for _ in range(2):
                        await asyncio.sleep(0)
                        r = await client.post("http://x/v1/chat/completions", json={"messages": [{"content": n}]})
                        assert r.json()["choices"][0]["token_ids"] == [n + 100]

            await asyncio.gather(rollout("a", 1), rollout("b", 2))
            await client.get("http://x/v1/models")
            await client.post("http://x/v1/chat/completions", json={"messages": [{"content": 3}]})  # no scope

    asyncio.run(main())
    assert all(b["return_token_ids"] is True for b in seen)
    assert [c.completion_ids for c in store.calls[("a", 0)]] == [[101], [101]]
    assert [c.prompt_ids for c in store.calls[("b", 0)]] == [[2, 2], [2, 2]]
    assert store.untraced == 1


def test_each_step_writes_tensorboard_scalars_the_manifest_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step's reward mean, step time and (after an update) loss reach train/tensorboard as scalars; a step
    without signal (equal rewards) has no update, hence no loss. Each step's progress record goes to the run's
    progress and, flat, to metrics.jsonl. The update itself is stubbed (it is test_pg_worker_updates_the_real_model's).
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def collect(checkpoint: Path, batch: list[Any], n: int, temperature: float, out: Path, trace: TraceStore) -> Any:
        step = int(out.stem.removeprefix("rollouts-step"))
        episodes = []
        for task in batch:
            for sample in range(n):
                trace.add((task.id, sample), Call([1, 2], [3, 4, 5]))
                # step 1: one of each group passes (signal); step 2: every rollout fails (no signal)
                episodes.append(Episode(task_id=task.id, sample=sample, reward=float(step == 1 and sample == 0)))
        return episodes

    def update(self: Any, request: Any, config: Any, checkpoint: Path, triplets: Any, out: Path, step: int) -> Any:
        out.mkdir(parents=True)
        return {"loss": 0.25, "grad_norm": 1.5}

    monkeypatch.setattr(TraceGrpoEngine, "_update", update)
    config = {"steps": 2, "tasks_per_step": 2, "group_size": 2}
    spec: Any = SimpleNamespace(training=SimpleNamespace(config=config))
    run_dir = tmp_path / "run"
    request = TrainRequest(
        spec=spec,
        spec_path=tmp_path / "spec.yaml",
        base_model=tmp_path / "base",
        output_dir=run_dir / "train",
        seed=0,
        log_path=tmp_path / "train.log",
        tasks=[SimpleNamespace(id=f"t{i}") for i in range(3)],
        collect=collect,
        on_progress=lambda step, total, record: progress.append((step, total, record)),
    )
    progress: list[tuple[int, int, ProgressRecord]] = []
    result = TraceGrpoEngine().train(request)
    assert result.steps == 2 and result.checkpoint == run_dir / "train" / "step-1"
    assert progress == [(1, 2, result.metrics[0]), (2, 2, result.metrics[1])]
    first, second = result.metrics
    assert (first.step, first.loss, first.grad_norm, first.triplets, first.rollouts) == (1, 0.25, 1.5, 4, 4)
    assert first.signal is not None and (first.signal.groups, first.signal.signal_groups) == (2, 2)
    assert second.loss is None and second.signal is not None and second.signal.signal_groups == 0
    lines = (run_dir / "train" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [first.flat(), second.flat()]
    assert json.loads(lines[0])["signal_share"] == 1.0 and json.loads(lines[0])["step"] == 1.0
    assert _tensorboard_dir(run_dir) == "train/tensorboard"  # the manifest's engine.tensorboard
    curves = EventAccumulator(str(run_dir / "train" / "tensorboard"))
    curves.Reload()
    tags = set(curves.Tags()["scalars"])
    assert {"train/reward_mean", "train/step_time_s", "train/loss", "train/grad_norm"} <= tags
    assert [(e.step, e.value) for e in curves.Scalars("train/reward_mean")] == [(1, 0.5), (2, 0.0)]
    assert [(e.step, e.value) for e in curves.Scalars("train/loss")] == [(1, 0.25)]
    assert [e.step for e in curves.Scalars("train/step_time_s")] == [1, 2]


@pytest.mark.slow
def test_pg_worker_updates_the_real_model(smoke_model: Path, tmp_path: Path) -> None:
    """One policy-gradient step on SmolLM2: the weights change, the step is finite, side files travel."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smoke_model)
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], add_generation_prompt=True, tokenize=False)
    prompt = tok.encode(text, add_special_tokens=False)
    triplets = [
        Triplet(prompt_ids=prompt, completion_ids=tok.encode("4")[:3], advantage=1.0, rollout=("t", 0)),
        Triplet(prompt_ids=prompt, completion_ids=tok.encode("five")[:3], advantage=-1.0, rollout=("t", 1)),
    ]
    write_triplets(tmp_path / "t.jsonl", triplets)
    out = tmp_path / "out"
    job = tmp_path / "job.json"
    UpdateJob(
        checkpoint=smoke_model,
        triplets=tmp_path / "t.jsonl",
        output_dir=out,
        learning_rate=1e-4,
        max_grad_norm=1.0,
        seed=0,
        torch_threads=2,
    ).write(job)
    proc = subprocess.run(
        [sys.executable, "-m", "harness.engines.trace.worker", str(job)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith(PROGRESS_PREFIX)]
    result = read_progress(line, "update")
    assert result.step == 0 and result.loss is not None and result.update_s is not None
    assert result.grad_norm is not None and result.grad_norm > 0
    assert result.tokens == 2 * len(prompt) + len(triplets[0].completion_ids) + len(triplets[1].completion_ids)
    from harness.assets.models import checkpoint_hash

    assert checkpoint_hash(out) != checkpoint_hash(smoke_model)
    assert (out / "config.json").exists() and any(out.glob("tokenizer*"))
    assert AutoTokenizer.from_pretrained(out).chat_template == tok.chat_template
