"""Resumable runs: what ``harness run --resume <run_id>`` finds and reuses.

After every finished phase the runner writes ``run-state.json`` into the run folder (``artifacts/runs/<id>/``,
:mod:`harness.run.state`): which phases are done, the hashes they produced, the trained checkpoint and the wall
times. ``--resume`` starts a new attempt with its own run id in the same folder: set-up is redone (it is cached and
re-checks the dataset and model hashes against the recorded ones), finished phases are skipped and their records
read back, training continues from the engine's last saved checkpoint, and an unfinished evaluation reuses the
rollouts already in ``rollouts-<before|after>.jsonl``. The new attempt appends its own row, whose note names the run
it resumed.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.paths import artifacts_dir
from harness.run.state import STATE_FILE, RunState, read_state, state_path
from harness.spec.options import RunOptions


def find_run_dir(run_id: str, root: Path | None = None) -> Path:
    """The run folder of ``run_id``: its own, or the folder an earlier attempt of it was resumed in."""
    runs = (root or artifacts_dir()) / "runs"
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise HarnessError(f"--resume {run_id!r}: not a run id")
    direct = runs / run_id
    if state_path(direct).exists():
        return direct
    for candidate in sorted(runs.glob(f"*/{STATE_FILE}")):
        try:
            attempts = read_state(candidate.parent).attempts
        except HarnessError:  # a folder whose state cannot be read is not the one asked for
            continue
        if run_id in attempts:
            return candidate.parent
    if direct.is_dir():
        raise HarnessError(f"--resume {run_id}: {direct} has no {STATE_FILE} (the run finished no phase)")
    raise HarnessError(f"--resume {run_id}: no such run under {runs}")


def saved_options(run_id: str) -> RunOptions:
    """The options the run was started with (its benchmark, profile, seed, ...)."""
    return read_state(find_run_dir(run_id)).options


def restore(state: RunState, options: RunOptions, run_id: str, spec_hash: str) -> None:
    """Continue the run folder of ``run_id``: its finished phases, hashes and attempts."""
    run_dir = find_run_dir(run_id)
    saved = read_state(run_dir)
    where = state_path(run_dir)
    if saved.options.benchmark != options.benchmark:
        raise HarnessError(f"{where}: run {run_id} is of benchmark {saved.options.benchmark!r}")
    check_same(where, "the resolved spec", saved.spec_hash, spec_hash)
    if "eval" in saved.done:
        raise HarnessError(f"--resume {run_id}: the run already finished every phase")
    state.run_dir, state.saved = run_dir, saved
    state.attempts = list(saved.attempts)
    state.resumed_from = state.attempts[-1] if state.attempts else run_id
    state.done = [p for p in saved.done if p != "setup"]
    state.walls.update({p: saved.walls.get(p, 0.0) for p in state.done})
    if "train" in state.done:
        checkpoint = run_dir / saved.checkpoint
        if not (checkpoint / "config.json").exists():
            state.done.remove("train")  # the trained checkpoint is gone: train again (from a saved step)
        else:
            state.checkpoint = checkpoint
            state.model_hash_after = saved.model_hash_after
            state.train_steps = saved.train_steps
            state.train_metrics = list(saved.train_metrics)


def check_same(path: Path, what: str, recorded: str, now: str) -> None:
    """Refuse to resume when set-up produced something else than the run it continues."""
    if recorded and now and recorded != now:
        raise HarnessError(
            f"{path}: cannot resume: {what} changed since the run started ({recorded[:12]} -> {now[:12]})"
        )
