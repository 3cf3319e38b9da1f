"""``harness run --resume ID`` finds the run folder of ``ID``: its own, or the folder an earlier attempt of it was
resumed in (read from each folder's typed ``run-state.json``, a version-1 state upgraded); a folder whose state cannot
be read is passed over, and an id found nowhere is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.run.resume import find_run_dir
from harness.run.state import SavedState, write_state
from harness.spec.options import RunOptions


def saved(*attempts: str) -> SavedState:
    return SavedState(
        options=RunOptions(benchmark="arith"), spec_hash="h", attempts=list(attempts), done=["setup", "baseline"]
    )


def test_an_attempt_is_found_in_the_folder_it_was_resumed_in(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in ("a-broken", "b-other", "c-first"):
        (runs / name).mkdir(parents=True)
    (runs / "a-broken" / "run-state.json").write_text('{"version": 2, "attempts": ["c-third"]}')  # not a state
    write_state(runs / "b-other", saved("b-other"))
    write_state(runs / "c-first", saved("c-first", "c-second", "c-third"))
    assert find_run_dir("c-third", tmp_path) == runs / "c-first"
    assert find_run_dir("b-other", tmp_path) == runs / "b-other"  # its own folder
    # a state of version 1 (the options flat beside the rest) is read through its upgrade
    (runs / "d-old").mkdir()
    old = {"version": 1, "benchmark": "arith", "spec_hash": "h", "attempts": ["d-old", "d-new"], "done": ["setup"]}
    (runs / "d-old" / "run-state.json").write_text(json.dumps(old))
    assert find_run_dir("d-new", tmp_path) == runs / "d-old"


def test_an_unknown_id_or_a_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "runs" / "e-empty").mkdir(parents=True)
    with pytest.raises(HarnessError, match=r"^--resume nope: no such run under "):
        find_run_dir("nope", tmp_path)
    with pytest.raises(HarnessError, match=r"e-empty has no run-state.json \(the run finished no phase\)$"):
        find_run_dir("e-empty", tmp_path)
    with pytest.raises(HarnessError, match=r"not a run id"):
        find_run_dir("../x", tmp_path)
