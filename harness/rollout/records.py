"""The rollouts JSONL of one evaluation (``rollouts-<phase>.jsonl``): one :class:`Episode` per line, appended as
each rollout finishes. One reader serves both of its uses: an interrupted evaluation skips what is already there,
and a resumed run reads back a phase that an earlier attempt finished.

Each line carries its format's version (``schema_version``, :data:`~harness.benchmark.protocol.EPISODE_VERSION`)
and is read through :class:`harness.records.Versions`: a line written before lines had a version reads as version 1,
a newer one is refused. A line that is not JSON (or not UTF-8) is one a crash cut off, and is skipped; a JSON line
that is not a valid record is a one-line error naming the file and the line.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.benchmark.protocol import EPISODE_VERSION, Episode, Task
from harness.errors import HarnessError
from harness.records import Versions

VERSIONS = Versions("rollout record", EPISODE_VERSION, unversioned=1)
Key = tuple[str, int]


def to_line(episode: Episode) -> str:
    """One record as a JSON line: text as it is, or escaped where it cannot be UTF-8 (a lone surrogate in a model's
    reply would otherwise stop the run when the line is written); both read back the same."""
    record = episode.model_dump()
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record)
    return line


def read_records(path: Path) -> dict[Key, Episode]:
    """The last record of each (task, sample) in ``path`` (none when it does not exist); a line cut by a crash is
    skipped, any other line that is not a valid record is a one-line error naming ``path`` and the line."""
    out: dict[Key, Episode] = {}
    if not path.exists():
        return out
    for episode in VERSIONS.parse_lines(path.read_bytes(), Episode, str(path)):
        out[(episode.task_id, episode.sample)] = episode
    return out


def finished(path: Path) -> dict[Key, Episode]:
    """The records an interrupted evaluation keeps: all but infrastructure failures (those are run again)."""
    return {key: ep for key, ep in read_records(path).items() if not ep.is_infra}


def phase_records(path: Path, tasks: list[Task], samples_per_task: int) -> list[Episode]:
    """Every (task, sample) of a finished evaluation, in task order; a missing one is a one-line error."""
    wanted = {(t.id, s) for t in tasks for s in range(samples_per_task)}
    found = {key: ep for key, ep in read_records(path).items() if key in wanted}
    missing = len(wanted) - len(found)
    if missing:
        raise HarnessError(f"{path}: {missing} rollouts of a phase recorded as finished are missing")
    order = {t.id: i for i, t in enumerate(tasks)}
    return sorted(found.values(), key=lambda e: (order[e.task_id], e.sample))
