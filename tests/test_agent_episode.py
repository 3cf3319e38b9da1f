"""One real agent episode: Agent Framework agent -> real vLLM server (CPU) serving SmolLM2 -> real MCP calculator."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from harness.assets.data import load_split
from harness.rollout.evaluate import EvalSettings, evaluate
from harness.rollout.loading import open_benchmark
from harness.serving.server import serve

pytestmark = pytest.mark.slow


def test_agent_episode_against_served_model(smoke_model: Path, tmp_path: Path) -> None:
    spec, bench, _ = open_benchmark("math", "smoke")
    rows, _ = load_split(spec.dataset, "test")
    tasks = bench.tasks(rows)[:2]
    with serve(smoke_model, spec.model.name, spec.serving, tmp_path / "server.log") as server:
        # The server really serves the checkpoint, with token ids as the GPU path needs.
        r = httpx.post(
            server.endpoint.base_url + "/completions",
            json={"model": spec.model.name, "prompt": "1 + 1 =", "max_tokens": 4, "return_token_ids": True},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0].get("token_ids")
        settings = EvalSettings(
            base_url=server.endpoint.base_url,
            model=spec.model.name,
            temperature=0.0,
            max_tokens=64,
            max_turns=3,
            concurrency=2,
            samples_per_task=1,
            request_timeout_s=120,
            retries=1,
            seed=0,
        )
        out = tmp_path / "rollouts.jsonl"
        episodes = asyncio.run(evaluate(bench, tasks, settings, out))
    assert [e.task_id for e in episodes] == [t.id for t in tasks]
    for ep in episodes:
        assert ep.error_kind == "", ep.error
        assert ep.messages[0].role == "user"
        assert any(m.role == "assistant" for m in ep.messages)
        assert ep.prompt_tokens > 0 and ep.completion_tokens > 0
        assert ep.latency_s > 0
        assert ep.reward in (0.0, 1.0)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["task_id"] for r in records} == {t.id for t in tasks}
    assert not server.alive()
