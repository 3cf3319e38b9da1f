"""Versioned records that one process (or an older harness) writes and another reads back: the one-line wording of
a validation error, and reading a record through its format's upgrades into its model.

Every record the harness reads back (a result row, the run manifest, a run's saved state, an engine's job and
train-info files) carries its format's version under a key of its own. :class:`Versions` names that key, the
current version, the oldest one ever written and the step from each older version to the next;
:meth:`Versions.parse` brings a raw record up to the current version, refusing a newer one (dropping what a newer
harness wrote would lose data), and validates it into its model. Every problem is one line naming the record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError

M = TypeVar("M", bound=BaseModel)
Raw = dict[str, Any]
Step = Callable[[Raw], Raw]
"""One upgrade: a raw record of version ``v`` to one of version ``v + 1``."""


def first_error(err: ValidationError, *, root: str = "<root>", show_input: bool = False) -> str:
    """A validation error as one line: ``key.path: what is wrong``, ``(and N more)`` when there are more.

    Locations a validator adds (``function-...``) are left out, a key that is not printable is quoted and line
    breaks in the message are escaped, so the line stays one line; an unknown or a missing key is said so in
    words. ``root`` names the record where the error has no key; ``show_input`` adds the value that was refused
    (not for a whole object).
    """
    first = err.errors()[0]
    parts = [str(p) for p in first["loc"] if not str(p).startswith("function-")]
    loc = ".".join(p if p.isprintable() else repr(p) for p in parts) or root
    msg = first["msg"].replace("\n", "\\n")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "missing":
        msg = "missing required key"
    elif show_input and not isinstance(first["input"], dict):
        msg += f" (got {first['input']!r})"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


@dataclass(frozen=True)
class Versions:
    """The versions of one kind of record: where its version is kept and how an older one is brought up to date.

    ``what`` names the record in errors ("manifest", "run state"; empty for a table row, whose ``where`` says it);
    ``steps[v]`` upgrades a raw version-``v`` record to ``v + 1``; ``unversioned`` is the version of a record
    written before it carried one (None: such a record is refused). A version written as text (a CSV cell) stays
    text through the upgrades.
    """

    what: str
    current: int
    steps: Mapping[int, Step] = field(default_factory=dict)
    key: str = "schema_version"
    minimum: int = 1
    error: type[HarnessError] = HarnessError
    unversioned: int | None = None

    def _at(self, where: str) -> str:
        return f"{where}: {self.what}: " if self.what else f"{where}: "

    def version(self, raw: Mapping[str, Any], where: str) -> int:
        """The record's version; ``where`` names the record in errors."""
        if self.key not in raw:
            if self.unversioned is None:
                raise self.error(f"{self._at(where)}{self.key}: missing required key")
            return self.unversioned
        value = raw[self.key]
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise self.error(f"{self._at(where)}{self.key}: not an integer: {value!r}")

    def upgrade(self, raw: Raw, where: str) -> Raw:
        """``raw`` brought to the current version; a newer or unknown version is refused with a one-line error."""
        version = self.version(raw, where)
        if version > self.current:
            raise self.error(
                f"{self._at(where)}written by a newer harness ({self.key} {version}; this harness reads up to "
                f"{self.current}); update the harness"
            )
        if version < self.minimum:
            raise self.error(f"{self._at(where)}unknown {self.key} {version} (the oldest format is {self.minimum})")
        as_text = isinstance(raw.get(self.key), str)
        out = dict(raw)
        while version < self.current:
            step = self.steps.get(version)
            if step is None:
                raise self.error(f"{self._at(where)}no upgrade step from {self.key} {version} to {version + 1}")
            out = step(out)
            version += 1
            out[self.key] = str(version) if as_text else version
        return out

    def parse(self, raw: Any, model: type[M], where: str) -> M:
        """A record read from JSON, upgraded (:meth:`upgrade`) and validated into ``model``."""
        if not isinstance(raw, dict):
            raise self.error(f"{where}: {self.what or 'record'} must be a JSON object")
        upgraded = self.upgrade(raw, where)
        try:
            return model.model_validate(upgraded)
        except ValidationError as err:
            raise self.error(f"{self._at(where)}{first_error(err)}") from None

    def parse_lines(self, data: bytes, model: type[M], where: str, *, numbered: bool = True) -> list[M]:
        """The records of the JSON lines in ``data``, in order (:meth:`parse`). A line that is not JSON (or not
        UTF-8) is one a crash or a second writer cut off, and is skipped; any other line that is not a record of
        this version is a one-line error naming ``where`` and, when ``numbered``, the line (``where:N``)."""
        out = []
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                raw = json.loads(line.decode("utf-8"))
            except ValueError:  # not JSON, or cut inside a character
                continue
            out.append(self.parse(raw, model, f"{where}:{number}" if numbered else where))
        return out

    def read(self, path: Path, model: type[M]) -> M:
        """The record in the JSON file ``path``: read, upgraded and validated (:meth:`parse`)."""
        what = self.what or "record"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise self.error(f"{path}: cannot read {what}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise self.error(f"{path}: {what} is not UTF-8 text") from None
        try:
            raw = json.loads(text)
        except ValueError:
            raise self.error(f"{path}: {what} is not valid JSON") from None
        return self.parse(raw, model, str(path))


def write_record(path: Path, record: BaseModel, *, indent: int | None = 2) -> Path:
    """``record`` as a JSON file at ``path`` (its folder made), keys in the model's order, ``None`` left out."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.model_dump(mode="json", exclude_none=True), indent=indent) + "\n")
    return path
