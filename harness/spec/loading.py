"""Loading a spec: the YAML file, one profile merged over its base, validated against the schema.

A spec has a base section and, optionally, named ``profiles`` whose contents are deep-merged over the base before
validation, so a profile is a small diff (math's ``smoke`` swaps the model and shrinks the run). Mappings merge key by
key, except ``model`` (always replaced whole) and ``training`` when the profile names another engine. A spec without
``profiles`` has one, ``default``: its base. Every error is one line naming the file and the dotted key. A
benchmark's name is its folder's: the spec may leave ``name`` (and a dataset named alike) out.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from harness.errors import SpecError
from harness.registry import did_you_mean
from harness.spec.parse import deep_merge, format_validation_error, read_yaml, shape_clash
from harness.spec.schema import BenchmarkSpec, StrictModel

IMPLICIT_PROFILE = "default"


class SpecFile(StrictModel):
    """The file's own keys besides the base: ``profiles`` and which of them runs by default."""

    default_profile: str | None = Field(None, description="Needed when there are several profiles.")
    profiles: dict[str, Any] = Field(default_factory=dict, description="Profile name -> keys merged over the base.")

    def names(self) -> list[str]:
        return sorted(self.profiles) or [IMPLICIT_PROFILE]

    def default(self, path: Path) -> str:
        if self.default_profile is not None:
            if self.default_profile not in self.names():
                raise SpecError(
                    f"{path}: default_profile: unknown profile {self.default_profile!r}"
                    f"{did_you_mean(self.default_profile, self.names())} (profiles: {', '.join(self.names())})"
                )
            return self.default_profile
        if len(self.names()) > 1:
            raise SpecError(f"{path}: default_profile: missing (several profiles: {', '.join(self.names())})")
        return self.names()[0]


def _meta(raw: dict[str, Any], path: Path) -> SpecFile:
    try:
        return SpecFile.model_validate({k: raw[k] for k in ("default_profile", "profiles") if k in raw})
    except ValidationError as err:
        raise SpecError(format_validation_error(path, err)) from None


def resolve(raw: dict[str, Any], profile: str | None, path: Path) -> BenchmarkSpec:
    """Merge ``profile`` (default: the file's default) over the base of a raw spec mapping and validate it."""
    base = {k: v for k, v in raw.items() if k not in ("profiles", "default_profile")}
    meta = _meta(raw, path)
    default = meta.default(path)  # checked also when a profile is named, so `harness validate` sees it
    chosen = profile or default
    if chosen not in meta.names():
        raise SpecError(
            f"{path}: unknown profile {chosen!r}{did_you_mean(chosen, meta.names())} "
            f"(profiles: {', '.join(meta.names())})"
        )
    override = meta.profiles.get(chosen, {})
    if not isinstance(override, dict):
        raise SpecError(f"{path}: profiles.{chosen}: must be a mapping")
    if "profile" in override or "profile" in base:
        raise SpecError(f"{path}: profile: reserved key, set by the loader")
    clash = shape_clash(base, override)
    if clash:
        raise SpecError(f"{path}: {clash}: must be a mapping (profile {chosen!r} merges one over it)")
    merged = named(deep_merge(base, override), path)
    merged["profile"] = chosen
    try:
        spec = BenchmarkSpec.model_validate(merged)
        spec.dataset.bind_folder(path.parent)
    except ValidationError as err:
        raise SpecError(format_validation_error(path, err)) from None
    except RecursionError:
        raise SpecError(f"{path}: spec nested too deeply") from None
    return spec


def named(spec: dict[str, Any], path: Path) -> dict[str, Any]:
    """The benchmark's name where the spec leaves it out: its folder's (``benchmarks/<name>/spec.yaml``); the
    dataset's name, left out, is the benchmark's. A spec that says them resolves the same, so its hash is the same."""
    out = {"name": path.parent.name, **spec}
    if isinstance(out.get("dataset"), dict):
        out["dataset"] = {"name": out["name"], **out["dataset"]}
    return out


def profile_names(path: Path) -> list[str]:
    """The profiles of the spec at ``path`` (``default`` for a spec without ``profiles``)."""
    return _meta(read_yaml(path), path).names()


def default_profile(path: Path) -> str:
    return _meta(read_yaml(path), path).default(path)


def load_spec(path: Path, profile: str | None = None) -> BenchmarkSpec:
    """Load and validate ``path`` resolved with ``profile`` (the file's default profile when None)."""
    return resolve(read_yaml(path), profile, path)


HASH_OMITS_AT_DEFAULT: dict[tuple[str, str], object] = {("serving", "json_tool_calls"): False}
"""Options added after rows were recorded, left out of the hash while at their default: a spec that does not use
them keeps the hash its recorded rows carry (seeds are grouped, and reproductions checked, by that hash)."""


def spec_hash(spec: BenchmarkSpec) -> str:
    """A stable content hash of the resolved spec (profile included)."""
    data = spec.model_dump(mode="json")
    data.pop("shows", None)  # what the profile shows the reader, not what it runs
    for (section, key), default in HASH_OMITS_AT_DEFAULT.items():
        if isinstance(data.get(section), dict) and data[section].get(key) == default:
            del data[section][key]
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()
