"""Bytes <-> typed rows for the CSV tables, with checks that name the file and line of any problem.

Works on bytes, not paths, so the same code reads the working tree and ``git show`` output. ``where`` is the
label used in error messages (a path, or ``REV:path``).

Encoding: booleans are ``true``/``false``, ``None`` is an empty cell, floats use ``repr`` (exact round trip),
lines end in ``\\n``, quoting is minimal (a note with a comma or newline is quoted). The first line is the header.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from harness.errors import ResultsError
from harness.records import first_error
from harness.results.store.manifest import Manifest, parse_manifest
from harness.results.store.schema import (
    FORMAT_VERSION,
    INFRA_ERROR_KINDS,
    OPTIONAL_FLOAT_COLUMNS,
    OUTCOME_COLUMNS,
    RUN_COLUMNS,
    RunRow,
    TaskOutcome,
)
from harness.results.store.upgrade import RETIRED_COLUMNS, upgrade_row

_BOOLS = {
    "true": True,
    "True": True,
    "TRUE": True,
    "1": True,
    "false": False,
    "False": False,
    "FALSE": False,
    "0": False,
}
_PHASES = frozenset({"before", "after"})
_RUN_COLUMN_SET = frozenset(RUN_COLUMNS)


# ---------------------------------------------------------------------------------------------------- checksums


class ChecksumError(ResultsError):
    """A table does not match its checksum sidecar (or the sidecar is missing)."""


def sha256_hex(data: bytes) -> str:
    """Lower-case hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def encode_checksum(digests: Sequence[str], filename: str) -> bytes:
    """A checksum sidecar in ``sha256sum`` format. Two lines only while a write is in progress (old and new)."""
    return "".join(f"{d}  {filename}\n" for d in digests).encode()


def decode_checksum(data: bytes, where: str) -> set[str]:
    """The digests a sidecar accepts."""
    digests: set[str] = set()
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        digest = line.split(" ", 1)[0].strip()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ResultsError(f"{where}:{n}: not a sha256 checksum line")
        digests.add(digest)
    if not digests:
        raise ResultsError(f"{where}: empty checksum file")
    return digests


def verify_checksum(data: bytes, sidecar: bytes | None, where: str, sidecar_where: str) -> None:
    """Raise a one-line :class:`ChecksumError` unless ``data`` matches the sidecar."""
    if sidecar is None:
        raise ChecksumError(
            f"{where}: checksum file {sidecar_where} is missing; check the table, then run `harness results --rehash`"
        )
    if sha256_hex(data) not in decode_checksum(sidecar, sidecar_where):
        raise ChecksumError(
            f"{where}: checksum mismatch (truncated, corrupted or edited by hand); check the table, "
            "then run `harness results --rehash`"
        )


# ---------------------------------------------------------------------------------------------------- cells


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _decode_text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{where}: not UTF-8 text (byte {exc.start}); the file is corrupt") from None


def _rows(text: str, where: str) -> Iterable[tuple[int, list[str]]]:
    """CSV records with the line number each starts on."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        for record in reader:
            yield start, record
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ResultsError(f"{where}:{start}: malformed CSV: {exc}") from None


def _check_header(header: list[str], known: Iterable[str], where: str) -> None:
    allowed = set(known)
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise ResultsError(f"{where}:1: duplicate column {name!r}")
        seen.add(name)
        if name not in allowed:
            raise ResultsError(f"{where}:1: unknown column {name!r}")


# ---------------------------------------------------------------------------------------------------- runs table


def encode_runs(rows: Sequence[RunRow], header: bool = True) -> bytes:
    """``runs.csv`` content for ``rows`` in the current format (header first unless ``header`` is false)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(RUN_COLUMNS)
    for row in rows:
        writer.writerow([_cell(getattr(row, name)) for name in RUN_COLUMNS])
    return buf.getvalue().encode("utf-8")


def scan_run_ids(data: bytes, where: str) -> list[str] | None:
    """The run ids of a checksum-verified table when it is entirely in the current format, else ``None``.

    Lets an append add one line without re-validating every row: the checksum proves the bytes are what a
    harness (or a validating ``--rehash``) wrote. Anything unusual returns ``None`` and the caller takes the
    full, validating path.
    """
    text = _decode_text(data, where)
    if not text.endswith("\n"):
        return None
    records = iter(_rows(text, where))
    first = next(records, None)
    if first is None or tuple(first[1]) != RUN_COLUMNS:
        return None
    current = str(FORMAT_VERSION)
    ids: list[str] = []
    for _, record in records:
        if len(record) != len(RUN_COLUMNS) or record[0] != current:
            return None
        ids.append(record[1])
    return ids


def _run_row(raw: dict[str, str], where: str) -> RunRow:
    unknown = raw.keys() - _RUN_COLUMN_SET
    if unknown:
        raise ResultsError(f"{where}: unknown column {sorted(unknown)[0]!r} after format upgrade")
    values: dict[str, Any] = {k: (None if v == "" and k in OPTIONAL_FLOAT_COLUMNS else v) for k, v in raw.items()}
    try:
        return RunRow.model_validate(values)
    except ValidationError as exc:
        raise ResultsError(f"{where}: {first_error(exc, root='row', show_input=True)}") from None


def decode_runs(data: bytes, where: str, benchmark: str | None = None) -> list[RunRow]:
    """Parse and validate a whole ``runs.csv``; old-format rows are upgraded, newer ones refused.

    ``benchmark`` is the folder the table lives in: each row's ``benchmark`` must match it.
    """
    text = _decode_text(data, where)
    if not text.strip():
        raise ResultsError(f"{where}: empty table (no header line); the file is truncated")
    if not text.endswith("\n"):
        raise ResultsError(f"{where}: truncated (the last line is incomplete)")
    records = iter(_rows(text, where))
    _, header = next(records)
    _check_header(header, (*RUN_COLUMNS, *RETIRED_COLUMNS), where)
    for required in ("format_version", "run_id"):
        if required not in header:
            raise ResultsError(f"{where}:1: missing column {required!r}; not a runs table or the header is damaged")
    rows: list[RunRow] = []
    seen: dict[str, int] = {}
    for line, record in records:
        here = f"{where}:{line}"
        if len(record) != len(header):
            raise ResultsError(f"{here}: {len(record)} fields, the header has {len(header)}")
        raw = upgrade_row(dict(zip(header, record, strict=True)), here)
        row = _run_row(raw, here)
        if row.run_id in seen:
            raise ResultsError(f"{here}: duplicate run_id {row.run_id!r} (first on line {seen[row.run_id]})")
        if benchmark is not None and row.benchmark != benchmark:
            raise ResultsError(f"{here}: benchmark {row.benchmark!r} does not match its folder {benchmark!r}")
        seen[row.run_id] = line
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------- outcomes


@dataclass
class OutcomeRecords:
    """Validated outcome rows of one or more runs, stored by column (cheap to build for many thousand rows)."""

    run_id: list[str] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)
    task_id: list[str] = field(default_factory=list)
    sample: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    error_kind: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.task_id)

    def extend(self, other: OutcomeRecords) -> None:
        """Append ``other``'s rows."""
        for name in ("run_id", "phase", "task_id", "sample", "reward", "passed", "error_kind"):
            getattr(self, name).extend(getattr(other, name))

    def models(self) -> list[TaskOutcome]:
        """The rows as :class:`TaskOutcome` models (already validated, so constructed without re-validation)."""
        return [
            TaskOutcome.model_construct(phase=p, task_id=t, sample=s, reward=r, passed=ok, error_kind=e)
            for p, t, s, r, ok, e in zip(
                self.phase, self.task_id, self.sample, self.reward, self.passed, self.error_kind, strict=True
            )
        ]

    def infra_count(self, phase: str) -> int:
        """Samples of ``phase`` lost to infrastructure errors."""
        return sum(1 for p, e in zip(self.phase, self.error_kind, strict=True) if p == phase and e in INFRA_ERROR_KINDS)


def encode_outcomes(outcomes: Sequence[TaskOutcome], where: str) -> bytes:
    """An outcomes file for ``outcomes``; duplicate (phase, task_id, sample) keys are refused."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(OUTCOME_COLUMNS)
    seen: set[tuple[str, str, int]] = set()
    for o in outcomes:
        key = (o.phase, o.task_id, o.sample)
        if key in seen:
            raise ResultsError(f"{where}: duplicate outcome for phase={o.phase} task_id={o.task_id} sample={o.sample}")
        seen.add(key)
        writer.writerow([_cell(getattr(o, name)) for name in OUTCOME_COLUMNS])
    return buf.getvalue().encode("utf-8")


def _kind_ok(kind: str) -> bool:
    return all(c.islower() or c.isdigit() or c in "_-" for c in kind)


def _outcome_row_error(text: str, where: str, header: list[str]) -> ResultsError:
    """The first problem of an outcomes file, checked row by row with exact line numbers (the slow path)."""
    ip, it, isa, ir, ipa, ie = (header.index(c) for c in OUTCOME_COLUMNS)
    seen: set[tuple[str, str, str]] = set()
    records = iter(_rows(text, where))
    next(records)
    for line, rec in records:
        here = f"{where}:{line}"
        if len(rec) != len(header):
            return ResultsError(f"{here}: {len(rec)} fields, the header has {len(header)}")
        phase, task, sample, reward, passed, kind = rec[ip], rec[it], rec[isa], rec[ir], rec[ipa], rec[ie]
        if phase not in _PHASES:
            return ResultsError(f"{here}: phase: must be before or after (got {phase!r})")
        if not task:
            return ResultsError(f"{here}: task_id: empty")
        try:
            if int(sample) < 0:
                return ResultsError(f"{here}: sample: must be >= 0 (got {sample!r})")
        except ValueError:
            return ResultsError(f"{here}: sample: not an integer (got {sample!r})")
        try:
            if not math.isfinite(float(reward)):
                return ResultsError(f"{here}: reward: not finite (got {reward!r})")
        except ValueError:
            return ResultsError(f"{here}: reward: not a number (got {reward!r})")
        if passed not in _BOOLS:
            return ResultsError(f"{here}: passed: not a boolean (got {passed!r})")
        if not _kind_ok(kind):
            return ResultsError(f"{here}: error_kind: not a lower-case word (got {kind!r})")
        key = (phase, task, str(int(sample)))
        if key in seen:
            return ResultsError(f"{here}: duplicate outcome for phase={phase} task_id={task} sample={int(sample)}")
        seen.add(key)
    return ResultsError(f"{where}: invalid outcomes file")


def decode_outcomes(data: bytes, where: str, run_id: str = "") -> OutcomeRecords:
    """Parse and validate an outcomes file.

    Validation is column-wise (set and list operations over whole columns: many times faster than a model or a
    Python loop per row); when a check fails, a row-by-row pass finds the first bad line for the message.
    """
    text = _decode_text(data, where)
    if not text.strip():
        raise ResultsError(f"{where}: empty outcomes file (no header line); the file is truncated")
    if not text.endswith("\n"):
        raise ResultsError(f"{where}: truncated (the last line is incomplete)")
    try:
        table = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        list(_rows(text, where))  # raises with the line number
        raise ResultsError(f"{where}: malformed CSV: {exc}") from None
    header, body = table[0], table[1:]
    _check_header(header, OUTCOME_COLUMNS, where)
    missing = [c for c in OUTCOME_COLUMNS if c not in header]
    if missing:
        raise ResultsError(f"{where}:1: missing column {missing[0]!r}")
    width = len(header)
    if not set(map(len, body)) <= {width}:
        raise _outcome_row_error(text, where, header)
    columns: list[tuple[str, ...]] = list(zip(*body, strict=True)) if body else [() for _ in header]
    phase, task, sample_text, reward_text, passed_text, kind = (columns[header.index(c)] for c in OUTCOME_COLUMNS)
    try:
        sample = [int(x) for x in sample_text]
        reward = [float(x) for x in reward_text]
        passed = [_BOOLS[x] for x in passed_text]
    except (ValueError, KeyError):
        raise _outcome_row_error(text, where, header) from None
    valid = (
        set(phase) <= _PHASES
        and all(task)
        and min(sample, default=0) >= 0
        and all(map(math.isfinite, reward))
        and all(_kind_ok(k) for k in set(kind))
        and len(set(zip(phase, task, sample, strict=True))) == len(body)
    )
    if not valid:
        raise _outcome_row_error(text, where, header)
    return OutcomeRecords(
        run_id=[run_id] * len(body),
        phase=list(phase),
        task_id=list(task),
        sample=sample,
        reward=reward,
        passed=passed,
        error_kind=list(kind),
    )


# ---------------------------------------------------------------------------------------------------- manifests


def encode_manifest(manifest: Manifest, where: str) -> bytes:
    """Pretty JSON with sorted keys and a final newline."""
    try:
        return (json.dumps(manifest.to_json(), indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ResultsError(f"{where}: manifest is not JSON-serialisable: {exc}") from None


def decode_manifest(data: bytes, where: str) -> Manifest:
    """Parse and validate a manifest (older formats upgraded, :mod:`harness.results.store.manifest`)."""
    try:
        value = json.loads(_decode_text(data, where))
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{where}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ResultsError(f"{where}: manifest must be a JSON object, got {type(value).__name__}")
    return parse_manifest(value, where)
