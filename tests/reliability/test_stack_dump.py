"""`kill -USR1 <pid>` on a running `harness run`: every thread's stack is printed, and the run goes on undisturbed
(its model server keeps serving, the run finishes, exit 0, recorded complete). A real arith evaluation on the
smoke model; the signal comes twice while the model server is up.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from harness.results.store.store import ResultStore
from support import REPO
from support_reliability import harness, wait_for

pytestmark = pytest.mark.slow

HEADER = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$", re.M)


def test_sigusr1_prints_every_threads_stack_and_the_run_goes_on(smoke_model: Path, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        HARNESS_RESULTS=str(tmp_path / "results"),
        HARNESS_ARTIFACTS=str(tmp_path / "artifacts"),
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
    )
    with harness(["run", "arith", "--eval-only", "--limit", "2", "--backend", "local"], env) as hp:
        assert hp.tree is not None
        run_id = wait_for(
            lambda: next((ln.split()[1] for ln in hp.output if ln.startswith("run ")), None), 300, "run id", 0.05
        )
        servers = wait_for(lambda: hp.tree.having("vllm.entrypoints"), 300, "the model server", 0.1)
        for n in (1, 2):
            hp.proc.send_signal(signal.SIGUSR1)
            wait_for(lambda n=n: len(re.findall(r"^Current thread 0x", hp.text, re.M)) >= n, 30, f"stack dump {n}")
            assert hp.proc.poll() is None, hp.text[-3000:]  # still running
        assert set(servers) <= set(hp.tree.having("vllm.entrypoints"))  # its model server was left alone
        code = hp.wait(timeout=600)
        out = hp.text
        assert code == 0, out[-4000:]

    headers = HEADER.findall(out)
    assert headers.count("Current thread") == 2  # one dump per signal
    # every thread, not only the one that took the signal: the main thread in the run's phases, and the run's
    # helper threads (the memory sampler of harness/run/memory.py among them)
    assert headers.count("Thread") >= 1, out[-4000:]
    dump = out[out.index("(most recent call first):") :]
    assert re.search(r'File ".*/harness/run/runner\.py", line \d+ in _run\n', dump), dump[:3000]
    assert re.search(r'File ".*/harness/run/memory\.py", line \d+ in _loop\n', dump), dump[:3000]
    assert "Traceback" not in out and "interrupted" not in out

    (row,) = ResultStore(tmp_path / "results").runs("arith")
    assert row.run_id == run_id and row.status == "complete" and row.note == ""
    assert row.n_tasks == 2 and row.infra_errors_after == 0
    serving = ResultStore(tmp_path / "results").manifest("arith", run_id).serving
    assert serving is not None and serving.starts == 1  # never restarted
