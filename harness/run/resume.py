"""Resumable runs: a small state file in the run folder, and what ``harness run --resume <run_id>`` reuses.

After every finished phase the runner writes ``run-state.json`` into the run folder (``artifacts/runs/<id>/``):
which phases are done, the hashes they produced, the trained checkpoint and the wall times. ``--resume`` starts a
new attempt with its own run id in the same folder: set-up is redone (it is cached and re-checks the dataset and
model hashes against the recorded ones), finished phases are skipped and their records read back, training
continues from the engine's last saved checkpoint, and an unfinished evaluation reuses the rollouts already in
``rollouts-<phase>.jsonl``. The new attempt appends its own row, whose note names the run it resumed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.paths import artifacts_dir
from harness.rollout.protocol import Episode, Task

STATE_FILE = "run-state.json"
STATE_VERSION = 1


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_FILE


def write_state(run_dir: Path, data: dict[str, Any]) -> None:
    """Replace the run folder's state file atomically (a crash leaves the previous state)."""
    from harness.results.store.atomic import atomic_write

    payload = {"version": STATE_VERSION, **data}
    atomic_write(state_path(run_dir), (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())


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
            attempts = json.loads(candidate.read_text()).get("attempts", [])
        except (OSError, ValueError, AttributeError):
            continue
        if run_id in attempts:
            return candidate.parent
    if direct.is_dir():
        raise HarnessError(f"--resume {run_id}: {direct} has no {STATE_FILE} (the run finished no phase)")
    raise HarnessError(f"--resume {run_id}: no such run under {runs}")


def read_state(run_dir: Path) -> dict[str, Any]:
    """The saved state of a run folder, checked; every problem is a one-line error."""
    path = state_path(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read run state: {exc.strerror}") from None
    except ValueError:
        raise HarnessError(f"{path}: run state is not valid JSON") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: run state must be a JSON object")
    if data.get("version") != STATE_VERSION:
        raise HarnessError(f"{path}: run state version {data.get('version')!r} is not {STATE_VERSION}")
    need = {"benchmark": str, "profile": str, "seed": int, "attempts": list, "done": list, "spec_hash": str}
    for key, kind in need.items():
        if not isinstance(data.get(key), kind):
            raise HarnessError(f"{path}: run state: {key} missing or not a {kind.__name__}")
    return data


def read_rollouts(path: Path, tasks: list[Task], samples_per_task: int) -> list[Episode]:
    """The final record of every (task, sample) of a finished evaluation, in task order (the last line wins)."""
    fields = {f.name for f in dataclasses.fields(Episode)}
    wanted = {(t.id, s) for t in tasks for s in range(samples_per_task)}
    last: dict[tuple[str, int], Episode] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                raw = json.loads(line)
            except ValueError:
                continue
            ep = Episode(**{k: v for k, v in raw.items() if k in fields})
            if (ep.task_id, ep.sample) in wanted:
                last[(ep.task_id, ep.sample)] = ep
    missing = len(wanted) - len(last)
    if missing:
        raise HarnessError(f"{path}: {missing} rollouts of a phase recorded as finished are missing")
    order = {t.id: i for i, t in enumerate(tasks)}
    return sorted(last.values(), key=lambda e: (order[e.task_id], e.sample))


def check_same(path: Path, what: str, recorded: str, now: str) -> None:
    """Refuse to resume when set-up produced something else than the run it continues."""
    if recorded and now and recorded != now:
        raise HarnessError(
            f"{path}: cannot resume: {what} changed since the run started ({recorded[:12]} -> {now[:12]})"
        )
