"""``harness reproduce RUN_ID``: run a recorded run again from its row and manifest, and say whether it agrees.

1. The run must be complete and from a clean checkout; its commit must be in this repository and the tree at
   that commit must have the benchmark; the package versions the row recorded must be the ones installed now
   (``--allow-package-drift`` runs anyway and records the drift in the new row's note).
2. A clean git worktree of that commit runs ``harness run`` with the same benchmark, profile, seed and options
   (the harness of that commit, this machine's environments, caches and data mirror), into a scratch result store.
3. Its row, outcomes and manifest are appended to this store with the note ``reproduces <run_id>``, and
   :func:`harness.results.stats.agreement.agreement` says whether the two agree.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from harness.errors import HarnessError
from harness.paths import REPO_ROOT, artifacts_dir, cache_dir, env_python
from harness.results.stats.agreement import Agreement, agreement
from harness.results.store import git
from harness.results.store.manifest import Manifest, ReproductionRecord
from harness.results.store.reader import TableReader
from harness.results.store.schema import RunRow, parse_packages
from harness.results.store.sources import REPRODUCTION_NOTE
from harness.results.store.store import ResultStore
from harness.results.store.tree import FsTree
from harness.run.provenance import run_packages
from harness.spec.options import RunOptions
from harness.tools.servers import tool_servers

IGNORED_PACKAGE_PREFIXES = ("image:",)
"""Recorded versions not compared: container image digests depend on the machine's image store."""


@dataclass
class ReproduceOptions:
    """What ``harness reproduce`` was asked."""

    run_id: str
    benchmark: str | None = None
    allow_package_drift: bool = False
    data_mirror: Path | None = None
    results_root: Path | None = None
    repo: Path = REPO_ROOT


def find_run(store: ResultStore, run_id: str, benchmark: str | None) -> RunRow:
    """The row of ``run_id`` (in ``benchmark``, or in whichever benchmark has it)."""
    found = [r for r in store.runs(benchmark) if r.run_id == run_id]
    if not found:
        scope = f"benchmark {benchmark!r}" if benchmark else "any benchmark"
        raise HarnessError(f"reproduce: run {run_id!r} not found in {scope} under {store.root}")
    if len(found) > 1:
        raise HarnessError(f"reproduce: run {run_id!r} is in several benchmarks; pass --benchmark")
    return found[0]


def package_drift(recorded: str, current: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Packages whose recorded version differs from ``current``: name -> (recorded, current or "missing")."""
    drift: dict[str, tuple[str, str]] = {}
    for name, version in parse_packages(recorded).items():
        if name.startswith(IGNORED_PACKAGE_PREFIXES):
            continue
        now = current.get(name, "missing")
        if now != version:
            drift[name] = (version, now)
    return drift


def drift_text(drift: dict[str, tuple[str, str]]) -> str:
    """``name recorded->current, ...``."""
    return ", ".join(f"{name} {old}->{new}" for name, (old, new) in sorted(drift.items()))


def run_arguments(row: RunRow, manifest: Manifest) -> list[str]:
    """``harness run`` arguments that repeat the run: its recorded options rebuilt as :class:`RunOptions`, with the
    row's benchmark, profile, seed and backend."""
    passed = manifest.args.resolved or manifest.args.as_passed
    if passed.get("checkpoint"):
        raise HarnessError(f"reproduce: run {row.run_id} evaluated a checkpoint given by path; it cannot be redone")
    resolved = {"benchmark": row.benchmark, "profile": row.profile, "seed": row.seed, "backend": row.backend}
    return RunOptions.from_recorded(dict(passed), **resolved).arguments()


MODEL_CACHE_ENTRIES = ("models", "digests.json")
"""What a harness writes itself from its sources (converted checkpoints, their hashes): not shared with the code of
another commit, whose conversion may write other files and so hash the same model differently."""


def own_model_cache(dest: Path) -> Path:
    """A cache for the reproduced commit: the shared cache's content-checked downloads (data, wheels, GGUF files)
    linked in, its converted models left out, so the commit's own code converts its model as the run did."""
    dest.mkdir(parents=True, exist_ok=True)
    shared = cache_dir()
    if shared.is_dir():
        for entry in shared.iterdir():
            if entry.name not in MODEL_CACHE_ENTRIES and not (dest / entry.name).exists():
                (dest / entry.name).symlink_to(entry.resolve())
    return dest


class Reproduction:
    """Checks, worktree, re-run, record, verdict."""

    def __init__(self, options: ReproduceOptions, console: Console | None = None) -> None:
        self.options = options
        self.console = console or Console()
        self.store = ResultStore(options.results_root)

    def check(self) -> tuple[RunRow, Manifest, str, dict[str, tuple[str, str]]]:
        """Refuse, as one line, what cannot be reproduced; else the row, manifest, full commit and any drift."""
        row = find_run(self.store, self.options.run_id, self.options.benchmark)
        rid = row.run_id
        if row.status != "complete":
            raise HarnessError(f"reproduce: run {rid} is {row.status}; only a complete run can be reproduced")
        if row.git_dirty:
            raise HarnessError(f"reproduce: run {rid} ran from a checkout with uncommitted changes; no commit holds")
        manifest = self.store.manifest(row.benchmark, rid)
        top, _ = git.repo_location(self.options.repo)
        try:
            commit = git.resolve_commit(top, row.git_commit)
        except HarnessError:
            raise HarnessError(
                f"reproduce: run {rid} was measured at commit {row.git_commit[:12]}, which is not in the "
                f"repository at {top}"
            ) from None
        spec = f"benchmarks/{row.benchmark}/spec.yaml"
        if git.cat_files(top, commit, [spec])[spec] is None:
            raise HarnessError(f"reproduce: the tree at commit {commit[:12]} has no {spec}")
        drift = package_drift(row.packages, run_packages())
        if drift and not self.options.allow_package_drift:
            raise HarnessError(
                f"reproduce: installed packages differ from run {rid}'s: {drift_text(drift)} "
                "(--allow-package-drift runs anyway and records it)"
            )
        return row, manifest, commit, drift

    @contextlib.contextmanager
    def _worktree(self, commit: str) -> Iterator[Path]:
        top, _ = git.repo_location(self.options.repo)
        scratch = Path(tempfile.mkdtemp(prefix=f"reproduce-{self.options.run_id[:40]}-"))
        tree = scratch / "tree"
        git.run_git(top, "worktree", "add", "--detach", str(tree), commit)
        try:
            yield tree
        finally:
            with contextlib.suppress(HarnessError):
                git.run_git(top, "worktree", "remove", "--force", str(tree))
            with contextlib.suppress(HarnessError):
                git.run_git(top, "worktree", "prune")
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)

    def _child_env(self, tree: Path, results: Path) -> dict[str, str]:
        """The reproducing run's environment: the commit's tree first on the path, then what the path held here but
        this checkout (packages installed into a folder, as ``scripts/gpu-install.sh`` does on a GPU machine)."""
        env = dict(os.environ)
        kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO_ROOT]
        env.update(
            PYTHONPATH=os.pathsep.join([str(tree), *kept]),
            HARNESS_RESULTS=str(results),
            HARNESS_BENCHMARKS=str(tree / "benchmarks"),
            HARNESS_ARTIFACTS=str(artifacts_dir()),
            HARNESS_CACHE=str(own_model_cache(tree.parent / "cache")),
        )
        for name in sorted({"serve-cpu", *(server.env for server in tool_servers())}):  # the helper environments
            env[f"HARNESS_ENV_{name.upper().replace('-', '_')}"] = str(env_python(name).parent.parent)
        if self.options.data_mirror is not None:
            env["HARNESS_DATA_MIRROR"] = str(self.options.data_mirror)
        return env

    def run(self) -> Agreement:
        """Reproduce the run; print and return the verdict."""
        row, manifest, commit, drift = self.check()
        args = run_arguments(row, manifest)
        self.console.print(f"reproducing {row.run_id} at commit {commit[:12]}: harness run {' '.join(args)}")
        if drift:
            self.console.print(f"  package drift (allowed): {drift_text(drift)}")
        with self._worktree(commit) as tree:
            scratch = tree.parent / "results"
            code = subprocess.call(
                [sys.executable, "-m", "harness.cli", "run", *args], cwd=tree, env=self._child_env(tree, scratch)
            )
            # the harness of an older commit may not write files.sha256: its fresh scratch store is read as legacy
            scratch_store = TableReader(FsTree(scratch), legacy_ok=True)
            new_rows = scratch_store.runs(row.benchmark)
            if not new_rows:
                raise HarnessError(f"reproduce: the run at commit {commit[:12]} recorded nothing (exit {code})")
            new = new_rows[-1]
            outcomes = scratch_store.outcomes(row.benchmark, new.run_id)
            new_manifest = scratch_store.manifest(row.benchmark, new.run_id)
        drift_note = f"package drift: {drift_text(drift)}" if drift else ""
        note = "; ".join(filter(None, [f"{REPRODUCTION_NOTE}{row.run_id}", new.note, drift_note]))
        recorded = new.model_copy(update={"note": note})
        new_manifest = new_manifest.model_copy(
            update={
                "reproduces": ReproductionRecord(run_id=row.run_id, commit=commit, package_drift=drift_text(drift)),
                "row": recorded,
            }
        )
        self.store.append_run(recorded, outcomes, new_manifest)
        verdict = agreement(
            row,
            recorded,
            self.store.outcome_records(row.benchmark, [row.run_id]),
            self.store.outcome_records(row.benchmark, [recorded.run_id]),
        )
        self.console.print(f"recorded {recorded.run_id} in {self.store.root / row.benchmark / 'runs.csv'} ({note})")
        for line in verdict.details:
            self.console.print(f"  {line}", markup=False, highlight=False)
        word = "agrees" if verdict.agrees else "does not agree"
        self.console.print(f"{recorded.run_id} {word} with {row.run_id} ({verdict.method})", markup=False)
        return verdict
