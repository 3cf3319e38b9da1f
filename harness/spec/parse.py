"""Reading a spec file: YAML without duplicate keys or runaway aliases, profiles deep-merged over the base, and
pydantic's errors as one line with the file and the dotted key path.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.errors import SpecError
from harness.records import first_error


def _replaces(key: str, base: Any, value: Any) -> bool:
    """Sections a profile replaces whole instead of merging: the model, and training when the engine changes."""
    if key == "model":
        return True
    if key == "training" and isinstance(base, dict) and isinstance(value, dict):
        return "engine" in value and value.get("engine") != base.get("engine")
    return False


def deep_merge(base: dict[str, Any], override: dict[str, Any], top: bool = True) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        replace = (top and _replaces(key, out.get(key), value)) or key == "select"  # a split's subset: whole
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not replace:
            if top and key == "user_simulator" and "model" in value:
                out[key] = {k: v for k, v in out[key].items() if k != "model"}  # a model is replaced whole
            out[key] = deep_merge(out[key], value, top=False)
        else:
            out[key] = copy.deepcopy(value)
    return out


def shape_clash(base: Any, override: dict[str, Any], prefix: str = "") -> str | None:
    """The first key where a profile merges a mapping over a base value that is not one (it would be masked)."""
    if not isinstance(base, dict):
        return None
    for key, value in override.items():
        if isinstance(value, dict) and key in base:
            inner = base[key]
            if inner is not None and not isinstance(inner, dict):
                return f"{prefix}{key}"
            found = shape_clash(inner, value, f"{prefix}{key}.")
            if found:
                return found
    return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys (PyYAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key; the base class reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def format_validation_error(path: Path, err: ValidationError) -> str:
    """A spec's validation error as one line naming the file and the key (:func:`harness.records.first_error`)."""
    return f"{path}: {first_error(err)}"


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping, turning every failure into a one-line SpecError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: spec file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read spec: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506  (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise SpecError(f"{path}: invalid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a YAML mapping, got {type(data).__name__}")
    if _expanded_size(data, {}) > MAX_SPEC_NODES:
        raise SpecError(f"{path}: invalid YAML: more than {MAX_SPEC_NODES} values once aliases are expanded")
    return data


MAX_SPEC_NODES = 100_000
"""A spec is small; YAML aliases can make a short file expand to billions of values (a "billion laughs")."""


def _expanded_size(node: Any, memo: dict[int, int]) -> int:
    """How many values ``node`` holds with every alias expanded (shared sub-trees counted once per use)."""
    if not isinstance(node, dict | list):
        return 1
    key = id(node)
    if key not in memo:
        memo[key] = 0  # a self-referencing alias counts as one value here and is refused by validation
        children = list(node.values()) if isinstance(node, dict) else node
        memo[key] = 1 + sum(min(_expanded_size(c, memo), MAX_SPEC_NODES + 1) for c in children)
    return memo[key]
