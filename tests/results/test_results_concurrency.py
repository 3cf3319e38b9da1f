"""Real processes appending at once, processes killed mid-write, read-only folders and failing writes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from results_factories import child_env, record

from harness.results.store.store import ResultStore

WORKER_PRELUDE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests_dir!r})
    from pathlib import Path
    from harness.results.store.store import ResultStore
    from harness.errors import ResultsError
    from results_factories import record
    """
).format(tests_dir=str(Path(__file__).parent))


def run_child(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WORKER_PRELUDE + textwrap.dedent(code)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_consistent(store: ResultStore, bench: str = "math", *, settled: bool = True) -> list[str]:
    """The table reads back, its sidecar holds its digest, and every row has its files.

    ``settled``: no write was interrupted, so the sidecar holds exactly one digest (else it may hold two).
    """
    rows = store.runs(bench)
    table = store.root / bench / "runs.csv"
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    lines = (store.root / bench / "runs.csv.sha256").read_text().splitlines()
    assert f"{digest}  runs.csv" in lines
    assert len(lines) == 1 if settled else len(lines) <= 2
    for row in rows:
        assert store.outcomes(bench, row.run_id)
        assert store.manifest(bench, row.run_id).run_id == row.run_id
    return [r.run_id for r in rows]


def test_concurrent_appends_from_many_processes_lose_nothing(tmp_path: Path) -> None:
    root, go = tmp_path / "results", tmp_path / "go"
    procs, per_proc = 8, 25
    worker = """
        import time
        store = ResultStore(Path({root!r}))
        Path({root!r}).parent.joinpath("ready-{i}").touch()
        while not Path({go!r}).exists():
            time.sleep(0.005)
        for j in range({n}):
            record(store, f"p{i}-{{j:02d}}", [True, False, j % 2 == 0], seed=j)
    """
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER_PRELUDE + textwrap.dedent(worker.format(root=str(root), go=str(go), n=per_proc, i=i)),
            ],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(procs)
    ]
    reader_code = """
        import time
        store = ResultStore(Path({root!r}))
        reads, last = 0, 0
        while not Path({go!r}).exists():
            time.sleep(0.005)
        while not Path({done!r}).exists():
            count = len(store.runs()) if (Path({root!r}) / "math").exists() else 0
            assert count >= last, (count, last)  # never an older or broken table
            reads, last = reads + 1, count
        print(reads, last)
    """
    done = tmp_path / "done"
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WORKER_PRELUDE + textwrap.dedent(reader_code.format(root=str(root), go=str(go), done=str(done))),
        ],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < procs and time.monotonic() < deadline:
        if any(child.poll() not in (None, 0) for child in children):
            break
        time.sleep(0.02)
    go.touch()  # all start appending at the same moment
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    done.touch()
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err  # a reader racing the writers never saw an error
    assert int(out.split()[0]) > 0
    ids = assert_consistent(ResultStore(root))
    assert len(ids) == procs * per_proc
    assert set(ids) == {f"p{i}-{j:02d}" for i in range(procs) for j in range(per_proc)}
    for i in range(procs):  # each process's rows keep their order
        own = [x for x in ids if x.startswith(f"p{i}-")]
        assert own == sorted(own)
    assert not list((root / "math").glob(".*.tmp"))


def test_killed_writer_leaves_a_readable_table(tmp_path: Path) -> None:
    root = tmp_path / "results"
    store = ResultStore(root)
    record(store, "seed-row", [True])
    worker = f"""
        store = ResultStore(Path({str(root)!r}))
        print("ready", flush=True)
        for j in range(100000):
            record(store, f"k{{j:05d}}", [True, False] * 20)
    """
    for delay in (0.3, 0.55, 0.8):
        child = subprocess.Popen(
            [sys.executable, "-c", WORKER_PRELUDE + textwrap.dedent(worker).replace("k{j", f"k{int(delay * 100)}-{{j")],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        ids = assert_consistent(store, settled=False)  # previous or new version, never a broken one
        assert ids[0] == "seed-row"
    before = len(store.runs())
    record(store, "after-kills", [True])  # the lock was released by the kernel
    assert len(store.runs()) == before + 1


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another (unprivileged) user can traverse, unlike pytest's private tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="results-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(path)


def test_read_only_folder_is_a_one_line_error_and_keeps_the_table(shared_dir: Path) -> None:
    root = shared_dir / "results"
    store = ResultStore(root)
    for i in range(3):
        record(store, f"r{i}", [True, False])
    table = root / "math" / "runs.csv"
    before = table.read_bytes()
    (root / "math" / ".runs.csv.lock").unlink(missing_ok=True)  # the lock file must be created, and cannot be
    for p in [root, *root.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    # root ignores permissions, so as root the writer runs as nobody; otherwise as this user
    drop = "import os\nos.setgid(65534)\nos.setuid(65534)\n" if os.geteuid() == 0 else ""
    proc = run_child(
        drop
        + f"""
store = ResultStore(Path({str(root)!r}))
assert [r.run_id for r in store.runs("math")] == ["r0", "r1", "r2"]  # reading still works
for bench in ("math", "fresh"):
    try:
        record(store, "r3", [True], benchmark=bench)
    except ResultsError as exc:
        print("ERROR", exc)
    else:
        print("NO ERROR")
"""
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("ERROR ") for line in lines), proc.stdout
    assert str(root / "math") in lines[0] and str(root / "fresh") in lines[1]
    assert all("permission denied" in line or "read-only" in line for line in lines)
    assert not (root / "fresh").exists()
    assert table.read_bytes() == before
    assert [r.run_id for r in store.runs()] == ["r0", "r1", "r2"]


def test_failed_write_keeps_the_previous_table(tmp_path: Path) -> None:
    """A write that fails midway (file-size limit: EFBIG, like a full disk) leaves the old table and no temp files."""
    root = tmp_path / "results"
    store = ResultStore(root)
    for i in range(40):
        record(store, f"r{i:02d}", [True, False])
    table = root / "math" / "runs.csv"
    before = table.read_bytes()
    assert len(before) > 12_000
    proc = run_child(
        f"""
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8_000, 8_000))
store = ResultStore(Path({str(root)!r}))
try:
    record(store, "big", [True, False])
except ResultsError as exc:
    print("ERROR", exc)
"""
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ERROR "), proc.stdout
    assert "runs.csv" in proc.stdout and "previous content unchanged" in proc.stdout
    assert len(proc.stdout.strip().splitlines()) == 1
    assert table.read_bytes() == before
    assert_consistent(store)
    assert not list((root / "math").glob(".*.tmp"))
    record(store, "big", [True, False])  # a retry succeeds (the orphaned outcome file is overwritten)
    assert store.runs()[-1].run_id == "big"
