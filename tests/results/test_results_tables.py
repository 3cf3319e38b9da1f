"""The table files: round trip, integrity checks, schema errors naming the line, format versions, updates."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from results_factories import accept_file, make_row, outcomes_from, record

from harness.errors import HarnessError, ResultsError
from harness.results.store.manifest import Manifest
from harness.results.store.schema import (
    FORMAT_VERSION,
    RUN_COLUMNS,
    RunRow,
    packages_string,
    parse_packages,
    utc_now_iso,
)
from harness.results.store.store import ResultStore
from harness.results.store.upgrade import upgrade_row


def one_line_error(exc: pytest.ExceptionInfo[ResultsError], *needles: str) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    assert isinstance(exc.value, HarnessError)
    for needle in needles:
        assert needle in message, message
    return message


def rehash(table: Path) -> None:
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    (table.parent / "runs.csv.sha256").write_text(f"{digest}  runs.csv\n")


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "results")


def table_of(store: ResultStore, bench: str = "math") -> Path:
    return store.root / bench / "runs.csv"


def test_round_trip_preserves_every_field(store: ResultStore) -> None:
    outcomes = outcomes_from([True, False, [True, True]], phase="before") + outcomes_from([True, True, [False, True]])
    row = make_row(
        "r1",
        outcomes,
        note='tricky, "quoted"\nmultiline note',
        pass_before=None,
        ci_before_low=None,
        ci_before_high=None,
        git_dirty=True,
        started_at=utc_now_iso(),
    )
    manifest = Manifest.for_row(row).model_copy(update={"train_metrics": [{"step": 1.0, "loss": 0.5}]})
    store.append_run(row, outcomes, manifest)
    assert store.runs() == [row]
    assert store.runs("math") == [row]
    assert store.runs("other") == []
    assert store.outcomes("math", "r1") == outcomes
    assert store.manifest("math", "r1") == manifest
    manifest_text = (store.root / "math" / "manifests" / "r1.json").read_text()
    assert manifest_text == json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n"
    lines = table_of(store).read_text().splitlines()
    assert lines[0] == ",".join(RUN_COLUMNS)
    assert lines[1].startswith(f"{FORMAT_VERSION},r1,r1,math,smoke,complete,")
    assert ",true," in lines[1]  # git_dirty
    assert ",,,," in lines[1]  # empty cells for the missing before-phase numbers
    outcome_lines = (store.root / "math" / "outcomes" / "r1.csv").read_text().splitlines()
    assert outcome_lines[0] == "phase,task_id,sample,reward,passed,error_kind"
    assert outcome_lines[1] == "before,t000,0,1.0,true,"


def test_checksum_sidecar_is_sha256sum_compatible(store: ResultStore) -> None:
    record(store, "r1", [True, False])
    digest = hashlib.sha256(table_of(store).read_bytes()).hexdigest()
    assert (store.root / "math" / "runs.csv.sha256").read_text() == f"{digest}  runs.csv\n"
    subprocess.run(["sha256sum", "--check", "--quiet", "runs.csv.sha256"], cwd=store.root / "math", check=True)


def test_reading_writes_nothing(store: ResultStore) -> None:
    record(store, "r1", [True])
    (store.root / "math" / ".runs.csv.lock").unlink(missing_ok=True)
    before = sorted(p.name for p in (store.root / "math").iterdir())
    assert store.runs() and store.outcomes("math", "r1") and store.manifest("math", "r1") is not None
    assert sorted(p.name for p in (store.root / "math").iterdir()) == before


def test_truncated_table_is_a_one_line_error(store: ResultStore) -> None:
    for i in range(3):
        record(store, f"r{i}", [True, False])
    table = table_of(store)
    data = table.read_bytes()
    table.write_bytes(data[: len(data) - 40])
    with pytest.raises(ResultsError) as exc:
        store.runs("math")
    one_line_error(exc, str(table), "checksum mismatch")
    rehash(table)  # even with a matching checksum, the cut line is detected
    with pytest.raises(ResultsError) as exc:
        store.runs("math")
    one_line_error(exc, str(table), "truncated")


def test_corrupted_byte_is_detected(store: ResultStore) -> None:
    record(store, "r1", [True, False])
    table = table_of(store)
    data = bytearray(table.read_bytes())
    data[-10] ^= 0x01
    table.write_bytes(bytes(data))
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, str(table), "checksum mismatch", "--rehash")


def test_empty_table_and_missing_sidecar(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    (store.root / "math" / "runs.csv.sha256").unlink()
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, str(table), "checksum file")
    table.write_bytes(b"")
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, str(table), "empty table")


def test_unknown_column_names_the_header_line(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    lines = table.read_text().splitlines()
    table.write_text(f"{lines[0]},colour\n{lines[1]},blue\n")
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, f"{table}:1", "unknown column 'colour'")


def test_bad_type_names_the_line(store: ResultStore) -> None:
    for i in range(3):
        record(store, f"r{i}", [True])
    table = table_of(store)
    lines = table.read_text().splitlines()
    seed_at = RUN_COLUMNS.index("seed")
    cells = lines[3].split(",")
    cells[seed_at] = "not-a-number"
    lines[3] = ",".join(cells)
    table.write_text("\n".join(lines) + "\n")
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, f"{table}:4", "seed")


def test_wrong_field_count_and_bad_status_name_the_line(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    lines = table.read_text().splitlines()
    table.write_text(f"{lines[0]}\n{lines[1]},extra\n")
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, f"{table}:2", "fields")
    table.write_text(f"{lines[0]}\n{lines[1].replace(',complete,', ',done,')}\n")
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, f"{table}:2", "status")


def test_newer_format_is_refused(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    text = table.read_text()
    table.write_text(text.replace(f"\n{FORMAT_VERSION},r1,", f"\n{FORMAT_VERSION + 1},r1,"))
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, f"{table}:2", "written by a newer harness")


def test_a_format_1_table_reads_as_version_1_and_an_append_rewrites_it_in_the_current_format(
    store: ResultStore,
) -> None:
    import csv
    import io

    old = make_row("old-1", outcomes_from([True, False]), note="written by format 1")
    v1_columns = [c for c in RUN_COLUMNS if c not in ("benchmark_version", "benchmark_sha256")]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(v1_columns)
    dumped = old.model_dump(mode="json")
    writer.writerow(["1" if c == "format_version" else ("" if dumped[c] is None else dumped[c]) for c in v1_columns])
    table = table_of(store)
    table.parent.mkdir(parents=True)
    table.write_text(buf.getvalue().replace(",False,", ",false,").replace(",True,", ",true,"))
    rehash(table)
    (row,) = store.runs()
    assert (row.format_version, row.benchmark_version, row.benchmark_sha256) == (FORMAT_VERSION, 1, "")
    assert row.model_dump(exclude={"format_version"}) == old.model_dump(exclude={"format_version"})
    record(store, "new-1", [True], benchmark_version=3, benchmark_sha256="f" * 64)
    lines = table.read_text().splitlines()
    assert lines[0].split(",") == list(RUN_COLUMNS)
    assert all(line.startswith(f"{FORMAT_VERSION},") for line in lines[1:])
    again = {r.run_id: r for r in store.runs()}
    assert again["old-1"] == row and (again["new-1"].benchmark_version, again["new-1"].benchmark_sha256) == (
        3,
        "f" * 64,
    )


def test_upgrade_steps_run_in_order() -> None:
    def v1_to_v2(raw: dict[str, str]) -> dict[str, str]:
        raw["backend"] = raw.pop("server")
        return raw

    def v2_to_v3(raw: dict[str, str]) -> dict[str, str]:
        return {**raw, "note": raw.get("note", "") + "+v3"}

    steps = {1: v1_to_v2, 2: v2_to_v3}
    raw = {"format_version": "1", "server": "vllm", "note": "old"}
    assert upgrade_row(raw, "t:2", steps=steps, current=3) == {
        "format_version": "3",
        "backend": "vllm",
        "note": "old+v3",
    }
    assert upgrade_row({"format_version": "3", "x": "y"}, "t:2", steps=steps, current=3)["x"] == "y"
    with pytest.raises(ResultsError, match="no upgrade step from format_version 2"):
        upgrade_row({"format_version": "2"}, "t:2", steps={1: v1_to_v2}, current=3)
    with pytest.raises(ResultsError, match="written by a newer harness"):
        upgrade_row({"format_version": "4"}, "t:2", steps=steps, current=3)
    with pytest.raises(ResultsError, match="unknown format_version 0"):
        upgrade_row({"format_version": "0"}, "t:2")
    with pytest.raises(ResultsError, match="t:2: format_version: not an integer"):
        upgrade_row({"format_version": "one"}, "t:2")


def test_transitional_sidecar_accepts_old_or_new_table(store: ResultStore) -> None:
    """The state a crash between the write steps leaves: sidecar lists old and new digests, table is either."""
    record(store, "r1", [True])
    table = table_of(store)
    old = table.read_bytes()
    record(store, "r2", [False])
    new = table.read_bytes()
    sidecar = store.root / "math" / "runs.csv.sha256"
    digests = [hashlib.sha256(d).hexdigest() for d in (old, new)]
    sidecar.write_text("".join(f"{d}  runs.csv\n" for d in digests))
    assert [r.run_id for r in store.runs()] == ["r1", "r2"]
    table.write_bytes(old)
    assert [r.run_id for r in store.runs()] == ["r1"]
    record(store, "r3", [True])  # the next write resolves the transitional state
    assert [r.run_id for r in store.runs()] == ["r1", "r3"]
    assert len(sidecar.read_text().splitlines()) == 1


def test_duplicate_run_id_is_refused_and_keeps_the_original(store: ResultStore) -> None:
    record(store, "r1", [True, True])
    with pytest.raises(ResultsError) as exc:
        record(store, "r1", [False, False])
    one_line_error(exc, "already recorded")
    assert [o.passed for o in store.outcomes("math", "r1")] == [True, True]


def test_update_run_replaces_in_place(store: ResultStore) -> None:
    record(store, "r1", [True])
    pending = make_row("r2", status="incomplete", train_steps=0)
    store.append_run(pending, [])
    record(store, "r3", [False])
    outcomes = outcomes_from([True, False, True])
    done = make_row("r2", outcomes)
    store.update_run(done, outcomes, Manifest.for_row(done).model_copy(update={"hardware": "done"}))
    rows = store.runs()
    assert [r.run_id for r in rows] == ["r1", "r2", "r3"]
    assert rows[1] == done
    assert store.outcomes("math", "r2") == outcomes
    assert store.manifest("math", "r2").hardware == "done"
    store.update_run(done.model_copy(update={"note": "checked"}))
    assert store.run("math", "r2").note == "checked"
    with pytest.raises(ResultsError) as exc:
        store.update_run(make_row("nope"))
    one_line_error(exc, "no run 'nope'")


def test_rehash_accepts_a_hand_edited_table_but_still_validates(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    table.write_text(table.read_text().replace("tiny-model", "renamed-model"))
    with pytest.raises(ResultsError):
        store.runs()
    store.rehash("math")
    assert store.runs()[0].model == "renamed-model"
    table.write_text(table.read_text().replace(",complete,", ",maybe,"))
    with pytest.raises(ResultsError) as exc:
        store.rehash("math")
    one_line_error(exc, f"{table}:2", "status")


def test_bad_outcome_row_names_the_line(store: ResultStore) -> None:
    record(store, "r1", [True, False, True])
    path = store.root / "math" / "outcomes" / "r1.csv"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace("true", "yes-ish")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, str(path), "checksum mismatch", "--rehash")
    accept_file(path)
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, f"{path}:4", "passed")
    path.write_text("\n".join(lines[:2]) + "\nafter,t00")
    accept_file(path)
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, str(path), "truncated")
    path.unlink()
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, str(path), "not found")


def test_non_utf8_table_is_reported(store: ResultStore) -> None:
    record(store, "r1", [True])
    table = table_of(store)
    table.write_bytes(table.read_bytes().replace(b"tiny-model", b"tiny-\xff\xfeodel"))
    rehash(table)
    with pytest.raises(ResultsError) as exc:
        store.runs()
    one_line_error(exc, str(table), "not UTF-8")


def test_row_model_validation() -> None:
    with pytest.raises(ValidationError, match="UTC"):
        make_row("r1", started_at="2025-01-01T00:00:00+02:00")
    with pytest.raises(ValidationError, match="failed_phase is required"):
        make_row("r1", status="failed")
    with pytest.raises(ValidationError, match="outside its CI"):
        make_row("r1", pass_after=0.9, ci_after_low=0.1, ci_after_high=0.5)
    with pytest.raises(ValidationError, match="run_id"):
        make_row("../escape")
    assert make_row("r1", status="failed", failed_phase="train").failed_phase == "train"
    assert make_row("r1", status="incomplete", failed_phase="eval").failed_phase == "eval"  # interrupted there
    with pytest.raises(ValidationError, match="failed_phase must be"):
        make_row("r1", failed_phase="train")
    assert make_row("r1", started_at="2025-01-01T00:00:00+00:00").started.year == 2025
    assert all(field.description for field in RunRow.model_fields.values())


def test_packages_string_round_trip() -> None:
    text = packages_string({"torch": "2.3.0", "pydantic": "2.12.5"})
    assert text == "pydantic=2.12.5;torch=2.3.0"
    assert parse_packages(text) == {"pydantic": "2.12.5", "torch": "2.3.0"}
    with pytest.raises(ValueError, match="contains"):
        packages_string({"bad;name": "1"})


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("during,t001,0,1.0,true,", "phase"),
        ("after,,0,1.0,true,", "task_id"),
        ("after,t001,-1,1.0,true,", "sample"),
        ("after,t001,x,1.0,true,", "sample"),
        ("after,t001,0,nan,true,", "reward"),
        ("after,t001,0,1.0,maybe,", "passed"),
        ("after,t001,0,1.0,true,Infra Error", "error_kind"),
        ("after,t000,0,1.0,true,", "duplicate"),
        ("after,t001,0,1.0,true,,extra", "fields"),
        ('after,"t001,0,1.0,true,\n', "malformed CSV"),
    ],
)
def test_outcome_row_problems_name_the_line(store: ResultStore, line: str, needle: str) -> None:
    record(store, "r1", [True])
    path = store.root / "math" / "outcomes" / "r1.csv"
    path.write_text(path.read_text() + line.rstrip("\n") + "\n")
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, str(path), "checksum mismatch")
    accept_file(path)
    with pytest.raises(ResultsError) as exc:
        store.outcomes("math", "r1")
    one_line_error(exc, f"{path}:3", needle)


def test_infra_outcomes_round_trip(store: ResultStore) -> None:
    outcomes = outcomes_from([True, False, True], infra=[(1, 0)])
    row = make_row("r1", outcomes)
    assert row.infra_errors_after == 1 and row.pass_after == 1.0
    store.append_run(row, outcomes)
    back = store.outcomes("math", "r1")
    assert [o.error_kind for o in back] == ["", "infra", ""]
    assert [o.is_infra for o in back] == [False, True, False]
