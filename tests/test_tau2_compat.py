"""The LiteLLM and loguru shims of benchmarks/tau2/compat.py: each has a test that fails when the shim stops working
and one that fails when it stops being needed (the upstream behaviour it works around is gone). The tiktoken,
tool-schema and history-window shims have theirs in test_tau2.py.

Each side runs in a fresh interpreter (the shims change process-wide state: an environment variable read at
LiteLLM's import, loguru's global handlers) that imports what the benchmark imports, the lab runner and through it
τ²'s evaluator and LiteLLM, with a Python audit hook that records and refuses every network access.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from support import REPO

COMPAT = REPO / "benchmarks" / "tau2" / "compat.py"
MARK = "--- the lab runner starts"

PROBE = textwrap.dedent(
    """
    import json
    import sys
    from pathlib import Path

    attempts = []

    def refuse_network(event, args):
        if event == "socket.getaddrinfo":
            attempts.append(str(args[0]))
            raise OSError(f"the test refuses network access ({args[0]})")
        if event == "socket.connect" and isinstance(args[1], tuple):
            attempts.append(str(args[1][0]))
            raise OSError("the test refuses network access")

    sys.addaudithook(refuse_network)
    if sys.argv[1] == "shimmed":
        from harness.benchmark import load_module

        load_module(Path(sys.argv[2]), "harness_benchmark_tau2_compat").apply(Path(sys.argv[3]))

    from agent_framework_lab_tau2 import TaskRunner  # imports tau2's evaluator, which imports LiteLLM
    import litellm
    from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
    from loguru import logger

    print(sys.argv[4], file=sys.stderr, flush=True)
    TaskRunner(max_steps=4)  # what each rollout does first
    logger.error("an error from tau2's logger")
    cost_map = get_model_cost_map_source_info()
    print(json.dumps({"attempts": attempts, "cost_map": cost_map, "models": len(litellm.model_cost)}))
    """
)


def _probe(tmp_path: Path, mode: str) -> tuple[dict[str, Any], str]:
    """(what the probe reports, its stderr after the lab runner's import) with the shims applied or not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(COMPAT), str(tmp_path / "tiktoken"), MARK],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert MARK in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1]), proc.stderr.split(MARK, 1)[1]


@pytest.fixture(scope="module")
def shimmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _probe(tmp_path_factory.mktemp("shimmed"), "shimmed")


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    return _probe(tmp_path_factory.mktemp("bare"), "bare")


def test_litellm_shim_keeps_the_cost_map_local(shimmed: tuple[dict[str, Any], str]) -> None:
    report, _ = shimmed
    assert report["attempts"] == []  # no network access at all, LiteLLM's or anyone's
    cost_map = report["cost_map"]
    assert cost_map["source"] == "local" and cost_map["is_env_forced"] is True and cost_map["url"] is None
    assert report["models"] > 1000  # LiteLLM's bundled map, loaded


def test_litellm_still_downloads_its_cost_map_at_import_without_the_shim(bare: tuple[dict[str, Any], str]) -> None:
    """When this fails, LiteLLM no longer fetches at import: delete LITELLM_LOCAL_MODEL_COST_MAP from compat.py."""
    report, _ = bare
    cost_map = report["cost_map"]
    assert cost_map["is_env_forced"] is False and cost_map["url"].startswith("https://")
    host = urlsplit(cost_map["url"]).hostname
    assert host in report["attempts"], report
    # refused here, so LiteLLM fell back to the same bundled map
    assert cost_map["source"] == "local" and "fail" in (cost_map["fallback_reason"] or "").lower()


def test_loguru_shim_keeps_errors_and_drops_the_rest(shimmed: tuple[dict[str, Any], str]) -> None:
    _, stderr = shimmed
    assert "TaskRunner has been re-initialized" not in stderr and "| INFO" not in stderr, stderr[-2000:]
    assert "| ERROR" in stderr and "an error from tau2's logger" in stderr


def test_the_lab_runner_still_logs_every_rollout_at_info_without_the_shim(bare: tuple[dict[str, Any], str]) -> None:
    """When this fails, the lab runner no longer logs each rollout at INFO: the loguru lines in compat.py can go."""
    _, stderr = bare
    lines = [ln for ln in stderr.splitlines() if "TaskRunner has been re-initialized" in ln]
    assert len(lines) == 1 and "| INFO" in lines[0], stderr[-2000:]
