"""Run every benchmark script and write a Markdown summary to ``bench/results/<UTC timestamp>.md``.

Each script prints its own figures as ratios against a baseline measured in the same run; this collects their
output with the machine's core count and CPU model, since absolute times are only comparable on one machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from harness.provenance import cpu_model, git_state

HERE = Path(__file__).resolve().parent
SCRIPTS = ["tool_overhead.py", "compare_scale.py", "eval_throughput.py"]


def main() -> int:
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    commit, dirty = git_state()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# Benchmarks {stamp}",
        "",
        f"- machine: {os.cpu_count()} cores, {cpu_model()}",
        f"- commit: {commit}{' (dirty)' if dirty else ''}",
        "",
    ]
    failed = 0
    for script in sys.argv[1:] or SCRIPTS:
        print(f"== {script}", flush=True)
        start = time.monotonic()
        proc = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True)
        wall = time.monotonic() - start
        body = proc.stdout.strip() or "(no output)"
        print(body, flush=True)
        if proc.returncode != 0:
            failed += 1
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            body += f"\n\nexit code {proc.returncode}:\n{tail}"
        lines += [f"## {script} ({wall:.0f} s)", "", "```", body, "```", ""]
    path = out_dir / f"{stamp}.md"
    path.write_text("\n".join(lines))
    print(f"summary: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
