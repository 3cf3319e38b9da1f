"""bench/reference_anchor.py: the sample's edits apply exactly once or fail in one line, verl's console metrics are
read back, and the side-by-side report reads a recorded harness run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reference_anchor", REPO / "bench" / "reference_anchor.py")
assert spec and spec.loader
anchor = importlib.util.module_from_spec(spec)
sys.modules["reference_anchor"] = anchor
spec.loader.exec_module(anchor)

# The lines of the sample that the edits touch, in its own layout.
SAMPLE = """import os
import re

        MCPStdioTool(name="calculator", command="uvx", args=["mcp-server-calculator"]) as mcp_server,
                "name": "vllm",
                "path": "Qwen/Qwen2.5-1.5B-Instruct",
                "use_remove_padding": True,
            "total_epochs": 2,
"""


def test_the_edits_apply_once_and_compile() -> None:
    text = anchor.apply_edits(SAMPLE, anchor.edits("/models/qwen", 16))
    assert '"path": "/models/qwen",' in text
    assert 'command=sys.executable, args=["-m", "mcp_server_calculator"]' in text and "import sys\n" in text
    assert '"tool_call_parser": "hermes"' in text and '"attn_implementation": "sdpa"' in text
    assert '"total_training_steps": 16,' in text and "uvx" not in text


def test_a_sample_without_an_edits_text_is_refused_in_one_line() -> None:
    with pytest.raises(SystemExit, match="edit 'attention': expected its text once in the sample, found 0"):
        anchor.apply_edits(SAMPLE.replace('"use_remove_padding": True,', ""), anchor.edits("/m", None))


def test_verl_console_metrics_are_read_per_step() -> None:
    log = "\n".join(
        [
            "(TaskRunner pid=1) step:0 - val/reward:0.100",
            "noise line",
            "(TaskRunner pid=1) step:1 - critic/score/mean:0.125 - response_length/mean:100.0 - timing_s/gen:4.0 "
            "- timing_s/step:10.0 - perf/throughput:900.0",
            "step:2 - critic/score/mean:np.float64(0.25) - response_length/mean:120.0 - timing_s/gen:4.0 "
            "- timing_s/step:np.float32(12.0)",
            "step:3 - critic/score/mean:0.5 - response_length/mean:80.0 - timing_s/gen:2.0 - timing_s/step:30.0 "
            "- val/reward:0.35",
        ]
    )
    steps = anchor.parse_steps(log)
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    summary = anchor.reference_summary(steps, 32)
    assert summary["validation"] == {0: 0.1, 3: 0.35}
    assert summary["steps"] == 3 and summary["s_per_step"] == 12.0  # the middle step only
    assert summary["rollout_tokens_per_s"] == pytest.approx(120 * 32 / 4)
    assert summary["reward_per_step"] == [0.125, 0.25, 0.5]


def test_the_report_sets_a_recorded_harness_run_beside_it() -> None:
    har = anchor.harness_summary("math-20261203T073813Z-c8c2a1")
    assert har["profile"] == "reference-h200" and har["steps"] == 16 and har["validation"][0] == 0.2
    ref = anchor.reference_summary(anchor.parse_steps("step:0 - val/reward:0.1\nstep:1 - timing_s/step:20.0"), 32)
    meta = {"when": "t", "gpu": "g", "commit": "c", "command": "python x", "edits": [{"name": "n", "reason": "r"}]}
    text = anchor.report(ref, har, meta)
    assert "| 0 | 0.100 | 0.200 |" in text and "| s / step | 20.0 |" in text
    with pytest.raises(SystemExit, match="no manifest"):
        anchor.harness_summary("math-nope")
