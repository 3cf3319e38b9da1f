"""Does a small model call the calculator once its schema loses pydantic's generated ``title`` keys?

The MCP calculator describes its argument object as ``{"title": "calculateArguments", ...}``; small models copied
that title as the tool's name. The harness hands the agent the schema without titles
(:func:`harness.tools.schema.without_titles`). This measures the change on the math test split with a model that
writes Qwen's own tool-call format: the same greedy evaluation (``harness run math --profile P --eval-only``) twice
in the same session, once with the titles kept (the schema as the MCP server serves it; the baseline) and once as
the harness presents it, and prints per variant the share of rollouts with at least one parsed tool call, with a
call under the calculator's own name, with a ``###`` answer, and the pass rate, then the ratios to the baseline.
It also counts the rollouts that wrote a call as text (a JSON object with the call's arguments) that the
profile's tool-call parser did not take for one, and the tool names written in such text: a model that writes
the call in another format than its template's shows up there, not among the parsed calls.

Every run writes into a temporary results folder (or ``--keep DIR``), never into ``results/``.

Run: ``python bench/tool_schema.py [--profile coder-0.5b-cpu] [--limit N] [--keep DIR]`` (downloads and converts
the profile's model on first use, about 0.5 GB for the 0.5B; each evaluation takes minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# The baseline variant: the harness with schema titles kept, i.e. without the change being measured.
KEEP_TITLES = (
    "import sys, harness.tools.schema as s; s.without_titles = lambda schema: schema; "
    "from harness.cli import main; sys.argv[0] = 'harness'; sys.exit(main())"
)
HARNESS = "import sys; from harness.cli import main; sys.argv[0] = 'harness'; sys.exit(main())"


@dataclass
class Variant:
    name: str
    rollouts: int
    parsed_tool_call: float
    calculator_named: float
    hash_answer: float
    pass_rate: float
    wall_s: float
    tool_names: dict[str, int]
    call_as_text: float
    """Rollouts with a call written as text (a JSON object with the call's arguments) and none parsed."""
    names_in_text: dict[str, int]
    """Tool names written in such text (``"name": "..."``), by rollout."""


def measure(name: str, prelude: str, profile: str, limit: int | None, tmp: Path) -> Variant:
    env = dict(os.environ, HARNESS_RESULTS=str(tmp / name / "results"), HARNESS_ARTIFACTS=str(tmp / name / "art"))
    cmd = [sys.executable, "-c", prelude, "run", "math", "--profile", profile, "--eval-only", "--backend", "local"]
    if limit:
        cmd += ["--limit", str(limit)]
    print(f"== {name}: {' '.join(cmd[3:])}", flush=True)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"{name}: the evaluation failed (exit {proc.returncode})")
    files = sorted((tmp / name / "art" / "runs").glob("*/rollouts-*.jsonl"))
    if not files:
        raise SystemExit(f"{name}: the run wrote no rollouts file")
    episodes = [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]
    return summarize(name, episodes, wall)


_ARGUMENTS = re.compile(r'"(?:arguments|expression)"\s*:')
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')


def summarize(name: str, episodes: list[dict[str, Any]], wall_s: float) -> Variant:
    n = max(len(episodes), 1)
    names: dict[str, int] = {}
    in_text: dict[str, int] = {}
    named = as_text = 0
    for ep in episodes:
        calls = [c for m in ep.get("messages", []) for c in m.get("tool_calls", [])]
        for c in calls:
            names[str(c.get("name"))] = names.get(str(c.get("name")), 0) + 1
        named += any(c.get("name") == "calculate" for c in calls)
        text = " ".join(str(m.get("text", "")) for m in ep.get("messages", []) if m.get("role") == "assistant")
        if not calls and _ARGUMENTS.search(text):
            as_text += 1
            for tool in set(_NAME.findall(text)):
                in_text[tool] = in_text.get(tool, 0) + 1
    return Variant(
        name=name,
        rollouts=len(episodes),
        parsed_tool_call=sum(1 for ep in episodes if ep.get("tool_calls", 0) > 0) / n,
        calculator_named=named / n,
        hash_answer=sum(1 for ep in episodes if ep.get("answer") is not None) / n,
        pass_rate=sum(1 for ep in episodes if ep.get("passed")) / n,
        wall_s=wall_s,
        tool_names=names,
        call_as_text=as_text / n,
        names_in_text=in_text,
    )


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else ("same" if a == b else "from 0")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="coder-0.5b-cpu")
    parser.add_argument("--limit", type=int, default=None, help="first N test tasks (default: the spec's split)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the runs' artifacts in this folder")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            tmp = args.keep
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tool-schema-")))
        base = measure("titles kept", KEEP_TITLES, args.profile, args.limit, tmp)
        new = measure("titles removed", HARNESS, args.profile, args.limit, tmp)
        variants = [base, new]
    print(f"\nmath test split, profile {args.profile}, greedy, {new.rollouts} rollouts per variant:")
    head = ["tool call parsed", "named calculate", "call as text", "### answer", "pass", "wall"]
    print(f"  {'':16s} {head[0]:>17s} {head[1]:>16s} {head[2]:>13s} {head[3]:>11s} {head[4]:>5s} {head[5]:>6s}")
    for v in variants:
        print(
            f"  {v.name:16s} {v.parsed_tool_call:17.0%} {v.calculator_named:16.0%} {v.call_as_text:13.0%}"
            f" {v.hash_answer:11.0%} {v.pass_rate:5.0%} {v.wall_s:5.0f}s"
        )
        print(f"  {'':16s} parsed calls by name: {v.tool_names or 'none'}; names in text: {v.names_in_text or 'none'}")
    print(
        f"  removed / kept: tool call {ratio(new.parsed_tool_call, base.parsed_tool_call)}, named calculate "
        f"{ratio(new.calculator_named, base.calculator_named)}, ### answer {ratio(new.hash_answer, base.hash_answer)}, "
        f"pass {ratio(new.pass_rate, base.pass_rate)}"
    )
    if args.json:
        args.json.write_text(json.dumps({"profile": args.profile, "kept": asdict(base), "removed": asdict(new)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
